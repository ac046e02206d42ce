import JOSE
import MCPPolicy
import NIOCore
import Observability
import SecurityGuard

/// What an exchange on an MCP route keeps beside its request: the decision under way, the call as
/// decided, the list filter, the stream's events. A class of its own, made on MCP routes only, so
/// that every other request carries one pointer for it.
final class MCPExchangeState {
    /// An MCP POST's admitted caller and session, held until its whole body is read and decided on.
    var awaiting: (caller: AuthenticatedCaller, sessionID: String?)?
    /// The request's call as decided (set once its decision is made): the log line's and the metrics'.
    var call: MCPCallFields?
    /// `call != nil`, set with it (asked on every request of the route).
    var isDecided = false
    /// A `traceparent` the gateway started for the MCP server (the client sent none, or an invalid one).
    var startedTraceparent: String?
    /// A list call's answer is filtered to what the caller may use (`tools/list` on a route with tool rules).
    var listFilter: MCPListFilter?
    /// A filtered answer held whole until its end (JSON, or any answer with a length): its head and bytes so far.
    var heldAnswer: (head: UpstreamResponseHead, bytes: [UInt8])?
    /// A filtered SSE answer, its events passed on as they complete.
    var eventFilter: MCPEventStreamFilter?
    /// The length of an answer the gateway rewrote, sent instead of the upstream's.
    var rewrittenLength: Int?
    /// An SSE answer's event boundaries, followed so that an end of access ends it between events.
    var events: SSEEventBoundary?
    /// Access ended while an event was under way: the stream ends at the event's end, or is cut at this.
    var endPending: Scheduled<Void>?
    /// The URL elicitations whose completion the gateway itself tells on this SSE answer
    /// (`notifications/elicitation/complete`), waiting for the end of the upstream's event under way.
    var pendingNotices: [String] = []
    /// The SSE answer has no length the client was told (chunked, HTTP/2, or until the close), so an event can be added to it.
    var eventsOpenEnded = false
    /// The caller's token's expiry, for the stream's end when it comes (an SSE answer only).
    var expiresAt: Double?
    /// The JSON-RPC ids of the requests forwarded (one, or a batch's), and the revision's fields:
    /// what an end of access tells the MCP server to stop working on (`MCPUpstreamCancellation`).
    var forwardedRequestIDs: [JSONValue] = []
    /// `MCP-Protocol-Version` as the client sent it.
    var protocolVersions: [String] = []
    /// The caller and session the request went upstream as: a cancellation goes as the request went
    /// (with an assertion made when it goes: the request's may have expired by then).
    var forwardedAs: (caller: AuthenticatedCaller, sessionID: String?)?
}
