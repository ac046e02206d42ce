import NIOHTTP1
import Traces

extension TraceContextFields {
    /// The trace context of an HTTP/1 request's head as the gateway follows it: its screened
    /// `traceparent` and `tracestate` when `follows` (a trusted proxy's, or anyone's with
    /// `tracing.continue_any_caller`), none otherwise (a trace starts here).
    package static func followed(in head: HTTPRequestHead, if follows: Bool) -> TraceContextFields {
        follows ? screened(traceparents: head.headers["traceparent"], tracestates: head.headers["tracestate"]) : TraceContextFields()
    }
}
