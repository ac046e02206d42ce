/// Why an upstream's bytes are not a response the proxy relays: the client gets a 502, the
/// operator's log gets `code` and the sentence, and the connection is closed (never reused).
struct UpstreamResponseError: Error, Equatable, CustomStringConvertible {
    /// A stable code for the log and the tests.
    let code: String
    let message: String

    var description: String { "\(code): \(message)" }

    static let invalidStatusLine = Self(code: "invalid_status_line", message: "the status line is not HTTP/1.x with a three-digit status")
    static let invalidField = Self(code: "invalid_field", message: "a header field has an invalid name or value, or is folded (obs-fold)")
    static let headTooLarge = Self(code: "head_too_large", message: "the response head or its trailers exceed the proxy's bound")
    static let tooManyFields = Self(code: "too_many_fields", message: "the response head has more fields than the proxy's bound")
    static let invalidContentLength = Self(code: "invalid_content_length", message: "Content-Length is not one non-negative decimal number")
    static let invalidChunk = Self(code: "invalid_chunk", message: "a chunk's size line or its end is not valid chunked framing")
    static let unexpectedUpgrade = Self(code: "unexpected_upgrade", message: "the upstream answered 101 to a request that asked for no upgrade")
    static let unsolicited = Self(code: "unsolicited_bytes", message: "the upstream sent bytes when no request was waiting for them")
    static let truncated = Self(code: "truncated", message: "the upstream closed the connection in the middle of its response")
}
