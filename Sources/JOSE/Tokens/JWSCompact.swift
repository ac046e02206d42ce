#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A JWS in compact serialisation (RFC 7515 section 7.1), parsed strictly.
///
/// Parsing checks structure only: size, three segments, canonical base64url in
/// each, and a strict-JSON object header with a string `alg`. It trusts
/// nothing; the signature is checked by `verifySignature(with:)`.
public struct JWSCompact: Sendable {
    /// The protected header.
    public let header: JSONObject
    /// The header's `alg` value, exactly as written.
    public let algorithmName: String
    /// The decoded payload bytes.
    public let payload: [UInt8]
    /// The decoded signature bytes.
    public let signature: [UInt8]
    /// The token text; the signing input is its first `signingInputLength` bytes, the header's
    /// text its first `headerTextLength`.
    private let compact: String
    private let signingInputLength: Int
    private let headerTextLength: Int
    /// Whether the header came from `KnownHeaders`, and the nesting limit it was read under.
    private let headerWasKnown: Bool
    private let headerReadDepth: Int

    /// `BASE64URL(header) || '.' || BASE64URL(payload)`: what the signature covers.
    public var signingInput: [UInt8] { Array(compact.utf8.prefix(signingInputLength)) }

    /// Default cap on a token's length in bytes (DESIGN.md: 8 KiB).
    public static let defaultMaximumBytes = 8192

    /// Parses a compact JWS.
    ///
    /// - Parameters:
    ///   - maximumBytes: tokens longer than this are refused before any other work.
    ///   - reader: the strict JSON reader for the header.
    public static func parse(_ token: String, maximumBytes: Int = defaultMaximumBytes, reader: StrictJSONReader = StrictJSONReader()) throws(TokenValidationError) -> JWSCompact {
        try parse(token, maximumBytes: maximumBytes, reader: reader, known: nil)
    }

    /// Parses a compact JWS, its header taken from `known` when it has read the same text.
    static func parse(_ token: String, maximumBytes: Int, reader: StrictJSONReader, known: KnownHeaders?) throws(TokenValidationError) -> JWSCompact {
        var token = token  // withUTF8 makes the string contiguous in place, once
        let parts = token.withUTF8 { bytes in
            Result { () throws(TokenValidationError) -> Parts in
                try parse(UnsafeRawBufferPointer(bytes), maximumBytes: maximumBytes, reader: reader, known: known)
            }
        }
        return JWSCompact(compact: token, parts: try parts.get())
    }

    /// What parsing the bytes yields; the token itself is kept by the caller.
    struct Parts {
        let header: JSONObject
        let algorithmName: String
        let payload: [UInt8]
        let signature: [UInt8]
        let signingInputLength: Int
        let headerTextLength: Int
        let headerWasKnown: Bool
        let headerReadDepth: Int
    }

    private init(compact: String, parts: Parts) {
        self.compact = compact
        self.header = parts.header
        self.algorithmName = parts.algorithmName
        self.payload = parts.payload
        self.signature = parts.signature
        self.signingInputLength = parts.signingInputLength
        self.headerTextLength = parts.headerTextLength
        self.headerWasKnown = parts.headerWasKnown
        self.headerReadDepth = parts.headerReadDepth
    }

    /// Parses a compact JWS from its bytes.
    static func parse(_ bytes: UnsafeRawBufferPointer, maximumBytes: Int, reader: StrictJSONReader, known: KnownHeaders? = nil) throws(TokenValidationError) -> Parts {
        try withParts(of: bytes, maximumBytes: maximumBytes, reader: reader, known: known) { parts in
            Parts(
                header: parts.header, algorithmName: parts.algorithmName, payload: Array(parts.payload),
                signature: Array(parts.signature), signingInputLength: parts.signingInput.count, headerTextLength: parts.headerText.count,
                headerWasKnown: parts.headerWasKnown, headerReadDepth: parts.headerReadDepth)
        }
    }

    /// A compact JWS's parts, borrowed for the length of one call: the signing input from the
    /// token's own bytes, the payload and signature from scratch memory. Never escape them.
    struct BorrowedParts {
        let header: JSONObject
        let algorithmName: String
        let payload: UnsafeRawBufferPointer
        let signature: UnsafeRawBufferPointer
        let signingInput: UnsafeRawBufferPointer
        /// The header's base64url text, whether what it reads to came from `KnownHeaders`, and the
        /// nesting limit of the reader that read it.
        let headerText: UnsafeRawBufferPointer
        let headerWasKnown: Bool
        let headerReadDepth: Int
    }

    /// Checks the structure of a compact JWS's bytes (the same checks as `parse`) and runs `body`
    /// with its parts, decoded into one scratch buffer: on the stack while they decode to at most
    /// 1 KiB (a token of about 1,370 characters), so verifying one makes no array.
    ///
    /// A header `known` has read from the same text is taken from it, not decoded and read again.
    static func withParts<Result>(
        of bytes: UnsafeRawBufferPointer, maximumBytes: Int, reader: StrictJSONReader, known: KnownHeaders? = nil,
        _ body: (BorrowedParts) throws(TokenValidationError) -> Result
    ) throws(TokenValidationError) -> Result {
        guard bytes.count <= maximumBytes else {
            throw TokenValidationError(.tooLarge, "the token is \(bytes.count) bytes; the limit is \(maximumBytes)")
        }
        guard !bytes.isEmpty else { throw TokenValidationError(.malformed, "the token is empty") }
        if bytes.count >= 4, bytes[0] == UInt8(ascii: "s"), bytes[1] == UInt8(ascii: "e"), bytes[2] == UInt8(ascii: "s"), bytes[3] == UInt8(ascii: "_") {
            throw TokenValidationError(.malformed, "a session_id was sent where an access token is expected")
        }
        // memchr is vectorised: finding the dots costs a fraction of a byte loop.
        func dot(after start: Int) -> Int? {
            guard start < bytes.count, let found = memchr(bytes.baseAddress! + start, Int32(UInt8(ascii: ".")), bytes.count - start) else { return nil }
            return bytes.baseAddress!.distance(to: UnsafeRawPointer(found))
        }
        let firstDot = dot(after: 0) ?? -1
        let secondDot = firstDot >= 0 ? dot(after: firstDot + 1) ?? -1 : -1
        if secondDot < 0 || dot(after: secondDot + 1) != nil {
            var dots = 0
            for index in 0..<bytes.count where bytes[index] == UInt8(ascii: ".") { dots += 1 }
            if dots == 4 {
                throw TokenValidationError(.malformed, "the token has five segments (an encrypted JWE); only signed JWS access tokens are accepted")
            }
            throw TokenValidationError(.malformed, "the token must have three dot-separated segments, not \(dots + 1)")
        }
        let headerText = UnsafeRawBufferPointer(rebasing: bytes[0..<firstDot])
        let payloadText = UnsafeRawBufferPointer(rebasing: bytes[(firstDot + 1)..<secondDot])
        let signatureText = UnsafeRawBufferPointer(rebasing: bytes[(secondDot + 1)...])
        func notCanonical(_ segment: String) -> TokenValidationError {
            TokenValidationError(.malformed, "the \(segment) segment is not canonical unpadded base64url")
        }
        // What each segment decodes to (a length no base64url has is refused here, in segment order).
        guard let headerCount = Base64URL.decodedCount(headerText.count) else { throw notCanonical("header") }
        guard let payloadCount = Base64URL.decodedCount(payloadText.count) else { throw notCanonical("payload") }
        guard let signatureCount = Base64URL.decodedCount(signatureText.count) else { throw notCanonical("signature") }
        // A header `known` has read from this text is not decoded or read again.
        let read = known?.header(readFrom: headerText, by: reader)
        let toDecode = read == nil ? headerCount : 0
        return try withScratch(byteCount: toDecode + payloadCount + signatureCount) { (scratch) throws(TokenValidationError) -> Result in
            let headerBytes = UnsafeMutableRawBufferPointer(rebasing: scratch[..<toDecode])
            let payloadBytes = UnsafeMutableRawBufferPointer(rebasing: scratch[toDecode..<(toDecode + payloadCount)])
            let signatureBytes = UnsafeMutableRawBufferPointer(rebasing: scratch[(toDecode + payloadCount)...])
            guard read != nil || Base64URL.decode(headerText, into: headerBytes) != nil else { throw notCanonical("header") }
            guard Base64URL.decode(payloadText, into: payloadBytes) != nil else { throw notCanonical("payload") }
            guard Base64URL.decode(signatureText, into: signatureBytes) != nil else { throw notCanonical("signature") }
            let (header, algorithmName) =
                if let read { (read.header, read.algorithmName) } else { try readHeader(UnsafeRawBufferPointer(headerBytes), reader: reader) }
            return try body(
                BorrowedParts(
                    header: header, algorithmName: algorithmName, payload: UnsafeRawBufferPointer(payloadBytes),
                    signature: UnsafeRawBufferPointer(signatureBytes), signingInput: UnsafeRawBufferPointer(rebasing: bytes[..<secondDot]),
                    headerText: headerText, headerWasKnown: read != nil, headerReadDepth: reader.maxDepth))
        }
    }

    /// The header's decoded bytes read strictly, and its `alg` (a string).
    private static func readHeader(_ bytes: UnsafeRawBufferPointer, reader: StrictJSONReader) throws(TokenValidationError) -> (JSONObject, String) {
        let header: JSONObject
        do throws(JSONReadError) {
            header = try reader.parseObject(bytes)
        } catch {
            throw TokenValidationError(.malformed, "the header is not strict JSON: \(error.message)")
        }
        guard let alg = header.value(of: .alg) else { throw TokenValidationError(.malformed, "the header has no \"alg\"") }
        guard let algorithmName = alg.stringValue else { throw TokenValidationError(.malformed, "the header's \"alg\" is not a string") }
        return (header, algorithmName)
    }

    /// Runs `body` with `byteCount` bytes of scratch memory, bound to `UInt8` (the reader reads
    /// it as bytes): on the stack up to 1 KiB (the standard library checks nothing below that),
    /// one heap allocation above.
    private static func withScratch<Result>(
        byteCount: Int, _ body: (UnsafeMutableRawBufferPointer) throws(TokenValidationError) -> Result
    ) throws(TokenValidationError) -> Result {
        if byteCount <= 1024 {
            return try withUnsafeTemporaryAllocation(byteCount: byteCount, alignment: 1) { (scratch) throws(TokenValidationError) -> Result in
                _ = scratch.bindMemory(to: UInt8.self)
                return try body(scratch)
            }
        }
        let heap = UnsafeMutableRawBufferPointer.allocate(byteCount: byteCount, alignment: 1)
        defer { heap.deallocate() }
        _ = heap.bindMemory(to: UInt8.self)
        return try body(heap)
    }

    /// Runs `body` with this token's parts, borrowed from its stored bytes.
    func withParts<Result>(_ body: (BorrowedParts) throws(TokenValidationError) -> Result) throws(TokenValidationError) -> Result {
        var compact = compact
        let outcome = compact.withUTF8 { utf8 in
            payload.withUnsafeBytes { payload in
                signature.withUnsafeBytes { signature in
                    Swift.Result { () throws(TokenValidationError) -> Result in
                        try body(
                            BorrowedParts(
                                header: header, algorithmName: algorithmName, payload: payload, signature: signature,
                                signingInput: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(utf8)[..<signingInputLength]),
                                headerText: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(utf8)[..<headerTextLength]),
                                headerWasKnown: headerWasKnown, headerReadDepth: headerReadDepth))
                    }
                }
            }
        }
        return try outcome.get()
    }

    /// The algorithm named by the header, refusing `none` in any spelling and
    /// anything Portcullis does not implement.
    public func algorithm() throws(TokenValidationError) -> JWSAlgorithm {
        try Self.algorithm(named: algorithmName)
    }

    /// The algorithm a header's `alg` names, refusing `none` in any spelling and anything not implemented.
    static func algorithm(named algorithmName: String) throws(TokenValidationError) -> JWSAlgorithm {
        if let algorithm = JWSAlgorithm(headerValue: algorithmName) { return algorithm }
        if algorithmName.lowercased() == "none" {
            throw TokenValidationError(.unsupportedAlgorithm, "unsigned tokens (alg \"none\") are never accepted")
        }
        throw TokenValidationError(.unsupportedAlgorithm, "the algorithm \"\(JSONValue.clip(algorithmName))\" is not supported")
    }

    /// Verifies the signature with `key`, which must be bound to the header's algorithm.
    public func verifySignature(with key: JWSKey) throws(TokenValidationError) {
        let algorithm = try algorithm()
        try withParts { (parts) throws(TokenValidationError) in
            try Self.verifySignature(of: parts, algorithm: algorithm, with: key)
        }
    }

    /// Verifies a token's signature over its own bytes (no copy of the signing input) with `key`,
    /// which must be bound to `algorithm`, the header's.
    static func verifySignature(of parts: BorrowedParts, algorithm: JWSAlgorithm, with key: JWSKey) throws(TokenValidationError) {
        guard algorithm == key.algorithm else {
            throw TokenValidationError(.algorithmMismatch, "the token says \(algorithm.rawValue) but key \"\(key.kid)\" is bound to \(key.algorithm.rawValue)")
        }
        guard key.verify(signature: parts.signature, message: parts.signingInput) else {
            throw TokenValidationError(.badSignature, "the signature does not verify with key \"\(key.kid)\"")
        }
    }

    /// Signs `payload` under `header` (which must name the key's algorithm) and
    /// returns the compact serialisation.
    public static func sign(header: JSONObject, payload: [UInt8], key: JWSKey) throws -> String {
        guard header["alg"]?.stringValue == key.algorithm.rawValue else {
            throw KeyError(.algorithmMismatch, "the header's alg must be \(key.algorithm.rawValue), the algorithm key \(key.kid) is bound to")
        }
        var input = Base64URL.encodeBytes(JSONWriter.bytes(.object(header)))
        input.append(UInt8(ascii: "."))
        input.append(contentsOf: Base64URL.encodeBytes(payload))
        let signature = try key.sign(input)
        input.append(UInt8(ascii: "."))
        input.append(contentsOf: Base64URL.encodeBytes(signature))
        return String(decoding: input, as: UTF8.self)
    }
}

extension JSONValue {
    /// Shortens attacker-controlled text before it goes into a message:
    /// at most `limit` characters, control characters replaced by `?`.
    public static func clip(_ text: String, to limit: Int = 40) -> String {
        let scalars = text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : String($0) }
        return scalars.count > limit ? scalars.prefix(limit).joined() + "..." : scalars.joined()
    }
}
