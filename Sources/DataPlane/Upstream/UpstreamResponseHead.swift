/// An upstream's response head as bytes: the status, and each field as ranges of `bytes`.
///
/// Made by `UpstreamResponseParser` with one copy of the head and one array of ranges; the
/// proxy writes the fields it returns straight from these bytes, with no string per header.
struct UpstreamResponseHead {
    /// How the body after this head ends (RFC 9112 §6.3).
    enum Framing: Equatable {
        /// No body: an answer to `HEAD`, 204, 304, or `Content-Length: 0`.
        case none
        /// Exactly this many bytes.
        case length(Int)
        /// `Transfer-Encoding: chunked`.
        case chunked
        /// Until the upstream closes the connection (no length, or a transfer coding other than chunked last).
        case untilClose
    }

    /// One field: its name and its value (trimmed of spaces and tabs) as ranges of `bytes`.
    struct Field {
        let name: Range<Int>
        let value: Range<Int>
    }

    /// The head, from its status line to the last field line (the blank line excluded).
    let bytes: [UInt8]
    let status: Int
    /// The reason phrase (possibly empty).
    let reason: Range<Int>
    let fields: [Field]
    let framing: Framing
    /// The connection may carry another exchange after this one (HTTP/1.1 without `Connection: close`,
    /// no transfer coding beside a length, a body whose end is known).
    let keepAlive: Bool
    /// The validated `Content-Length`, when the upstream sent one (for `HEAD` and 304 too, where it frames nothing).
    let contentLength: Int?

    /// Whether a field's name, lower-cased, is `lowercased`.
    func name(of field: Field, is lowercased: StaticString) -> Bool {
        UpstreamResponseParser.equalsLowercased(bytes[field.name], lowercased)
    }

    /// A field's name as a string (most names are short enough to need no allocation).
    func nameString(of field: Field) -> String {
        String(decoding: bytes[field.name], as: UTF8.self)
    }

    /// A field's name as a string in lower case (HTTP/2's spelling), copied once.
    func lowercasedNameString(of field: Field) -> String {
        let name = bytes[field.name]
        guard name.contains(where: { $0 &- UInt8(ascii: "A") < 26 }) else { return String(decoding: name, as: UTF8.self) }
        return String(unsafeUninitializedCapacity: name.count) { buffer in
            for (offset, byte) in name.enumerated() { buffer[offset] = byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte }
            return name.count
        }
    }

    /// A field's value as a string.
    func valueString(of field: Field) -> String {
        String(decoding: bytes[field.value], as: UTF8.self)
    }
}
