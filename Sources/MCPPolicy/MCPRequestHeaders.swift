import JOSE

/// The `Mcp-Method` and `Mcp-Name` fields of a request (MCP 2026-07-28), checked against its body.
///
/// They let an intermediary route without the body, but the server acts on the body: a gateway
/// that decided on a field the body contradicts would be deciding on another call. So the body is
/// always read, and a field that disagrees with it, or cannot be read, refuses the request.
public struct MCPRequestHeaders: Sendable, Equatable {
    /// Every `Mcp-Method` value sent (more than one is refused).
    public var methods: [String]
    /// Every `Mcp-Name` value sent, as sent (possibly `=?base64?...?=`).
    public var names: [String]

    public init(methods: [String] = [], names: [String] = []) {
        self.methods = methods
        self.names = names
    }

    public var isEmpty: Bool { methods.isEmpty && names.isEmpty }

    /// An `Mcp-Name` value as the body would spell it: the value itself, or the decoded bytes of the
    /// Base64 sentinel form `=?base64?VALUE?=` (standard alphabet, padded, valid UTF-8); `nil` when
    /// the sentinel form does not decode.
    public static func decodedName(_ value: String) -> String? {
        let bytes = Array(value.utf8)
        let prefix = Array("=?base64?".utf8)
        let suffix = Array("?=".utf8)
        guard bytes.count >= prefix.count + suffix.count, bytes.starts(with: prefix), bytes.suffix(2).elementsEqual(suffix) else { return value }
        let encoded = bytes[prefix.count..<(bytes.count - suffix.count)]
        guard encoded.count % 4 == 0 else { return nil }
        var url: [UInt8] = []
        url.reserveCapacity(encoded.count)
        var padding = 0
        for byte in encoded {
            switch byte {
            case UInt8(ascii: "="): padding += 1
            case _ where padding > 0: return nil  // padding only at the end
            case UInt8(ascii: "+"): url.append(UInt8(ascii: "-"))
            case UInt8(ascii: "/"): url.append(UInt8(ascii: "_"))
            case UInt8(ascii: "-"), UInt8(ascii: "_"): return nil  // not the standard alphabet
            default: url.append(byte)
            }
        }
        guard padding <= 2, let decoded = url.withUnsafeBytes({ Base64URL.decode($0) }) else { return nil }
        return String(validating: decoded, as: UTF8.self)
    }

    /// Why the fields disagree with `body`, or `nil` when they agree (or none was sent).
    ///
    /// A batch carries no such fields (they name one message); a method that names a thing needs
    /// `Mcp-Name` once `Mcp-Method` is sent, as the 2026-07-28 transport requires of clients.
    public func mismatch(with body: MCPBody) -> MCPBodyError? {
        guard !isEmpty else { return nil }
        guard case .single(let message) = body else {
            return MCPBodyError(.headerMismatch, "Mcp-Method and Mcp-Name name one message, and the body is a batch")
        }
        let id = message.id
        guard methods.count <= 1, names.count <= 1 else {
            return MCPBodyError(.headerMismatch, "Mcp-Method and Mcp-Name may each be sent once", id: id)
        }
        if let method = methods.first {
            guard let bodyMethod = message.method else {
                return MCPBodyError(.headerMismatch, "Mcp-Method is sent with a response, which has no method", id: id)
            }
            guard method.utf8.elementsEqual(bodyMethod.utf8) else {
                return MCPBodyError(.headerMismatch, "the Mcp-Method header does not match the body's method \(Self.printable(bodyMethod))", id: id)
            }
            // Required where 2026-07-28's transport requires it (tools/call, resources/read,
            // prompts/get); for another method that names something, checked only when sent.
            if message.name != nil, names.isEmpty, Self.namesRequired.contains(bodyMethod) {
                return MCPBodyError(.headerMismatch, "Mcp-Name is missing: \(Self.printable(bodyMethod)) names what it acts on, and Mcp-Method was sent", id: id)
            }
        }
        if let sent = names.first {
            guard let name = Self.decodedName(sent) else {
                return MCPBodyError(.headerMismatch, "Mcp-Name is not valid =?base64?...?= (standard Base64 of UTF-8)", id: id)
            }
            guard let bodyName = message.name else {
                return MCPBodyError(.headerMismatch, "Mcp-Name is sent, and the body's method names nothing", id: id)
            }
            guard name.utf8.elementsEqual(bodyName.utf8) else {
                return MCPBodyError(.headerMismatch, "the Mcp-Name header does not match the name in the body", id: id)
            }
        }
        return nil
    }

    /// The methods whose `Mcp-Name` the Streamable HTTP transport requires beside `Mcp-Method`.
    static let namesRequired: Set<String> = ["tools/call", "resources/read", "prompts/get"]

    /// A value from a request, fit for a message: printable ASCII, at most 80 characters, quoted.
    public static func printable(_ text: String) -> String {
        let kept = String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F && $0 != "\"" && $0 != "\\" }.prefix(80).map(Character.init))
        return "\"" + kept + "\""
    }
}
