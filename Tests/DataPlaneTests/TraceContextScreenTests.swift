@testable import DataPlane
import Testing
import Traces

/// A caller's Trace Context as the gateway follows it (`TraceContextFields.screened`): a
/// `traceparent` the tracer reads, and a `tracestate` both W3C and the tracer's reader accept,
/// or none; never a crash or a quadratic parse on what a client sends.
@Suite("A caller's trace context is followed only as the tracer reads it; an odd tracestate is dropped, the trace kept")
struct TraceContextScreenTests {
    static let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

    @Test("a traceparent is followed only in version 00's layout, lowercase hex, ids not all zero")
    func traceparents() {
        #expect(TraceContextFields.isValid(traceparent: Self.parent))
        for refused in [
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  // a later version: the tracer reads none
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  // uppercase
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01",
            "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "", String(repeating: "0", count: 55), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",
        ] {
            #expect(!TraceContextFields.isValid(traceparent: refused), "\(refused)")
        }
        // A proxy passing the field on unread (an MCP route, tracing off) takes a later version, never ff.
        #expect(TraceContextFields.isValid(traceparent: "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", laterVersions: true))
        #expect(!TraceContextFields.isValid(traceparent: "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", laterVersions: true))
    }

    @Test("a tracestate goes on only as W3C and the tracer's reader both take it: at most 512 bytes and 32 members")
    func tracestates() {
        for kept in ["a=b", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", "a=b, c=d", "a=b,   c=d", "t61@dd=x", "a-b_c*d/e=1 2"] {
            #expect(TraceContextFields.isValid(tracestate: kept), "\(kept)")
        }
        let thirtyTwo = (0..<32).map { "k\($0)=v" }.joined(separator: ",")
        #expect(TraceContextFields.isValid(tracestate: thirtyTwo))
        for dropped in [
            "", " a=b", "a=b,,c=d", "a=b,\tc=d", "a=b ", "A=b", "a=", "=b", "a=b=c", "a@b@c=d", "@s=v", "t@=v", "t@fifteencharsyst=v",
            "a=b\u{7F}", "a=é", (0..<33).map { "k\($0)=v" }.joined(separator: ","), "k=" + String(repeating: "v", count: 257),
            String(repeating: "a", count: 257) + "=v", String(repeating: "a=b,", count: 128) + "a=b",
        ] {
            #expect(!TraceContextFields.isValid(tracestate: dropped), "\(dropped.prefix(40))")
        }
    }

    @Test("a bad tracestate is dropped and its traceparent kept; a bad traceparent takes its tracestate with it")
    func screening() {
        #expect(TraceContextFields.screened(traceparent: Self.parent, tracestate: "a=b,,c") == TraceContextFields(traceparent: Self.parent))
        #expect(TraceContextFields.screened(traceparent: Self.parent, tracestate: "a=b") == TraceContextFields(traceparent: Self.parent, tracestate: "a=b"))
        #expect(TraceContextFields.screened(traceparent: "00-zz", tracestate: "a=b") == TraceContextFields())
        #expect(TraceContextFields.screened(traceparent: nil, tracestate: "a=b") == TraceContextFields())
        // A field sent twice names no one value: two traceparents, no parent; two tracestates, none kept.
        #expect(TraceContextFields.screened(traceparents: [Self.parent, Self.parent], tracestates: ["a=b"]) == TraceContextFields())
        #expect(TraceContextFields.screened(traceparents: [Self.parent], tracestates: ["a=b", "c=d"]) == TraceContextFields(traceparent: Self.parent))
    }

    @Test("a tracestate over 512 bytes is refused by its length before it is read")
    func longTracestates() {
        // 8 KiB of key, of value and of separators: refused at once by the 512-byte bound, never read through.
        for text in [String(repeating: "a", count: 8192), "a=" + String(repeating: "b", count: 8190), String(repeating: ",", count: 8192)] {
            #expect(!TraceContextFields.isValid(tracestate: text))
        }
    }

    @Test("the ids of an unrecorded trace are written two lowercase hex digits a byte")
    func carriedTraceparents() {
        #expect(TraceHeadSampling.hex([0x00, 0x0f, 0xa0, 0xff]) == "000fa0ff")
    }
}
