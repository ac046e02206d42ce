/// Strict base64url (RFC 4648 section 5) as JWS requires it.
///
/// Decoding refuses padding, the `+` and `/` alphabet, whitespace, a length of
/// 1 modulo 4, and non-zero trailing bits, so every byte string has exactly
/// one accepted encoding and a token cannot be altered without changing what
/// the signature covers.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// 0xFF marks a byte outside the base64url alphabet. A raw pointer,
    /// written once and never freed or mutated, so the hot loop needs no
    /// array access, retain or closure.
    nonisolated(unsafe) private static let decodeTable: UnsafePointer<UInt8> = {
        let table = UnsafeMutablePointer<UInt8>.allocate(capacity: 256)
        table.initialize(repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return UnsafePointer(table)
    }()

    /// True for a byte of the base64url alphabet (`A-Z a-z 0-9 - _`).
    public static func isAlphabet(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x5F
    }

    /// Whether `characters` are canonical, unpadded base64url: exactly what `decode` accepts, checked
    /// without decoding (no buffer is made; for identifiers checked on every request).
    public static func isCanonical<Characters: Collection>(_ characters: Characters) -> Bool where Characters.Element == UInt8 {
        let table = decodeTable
        var last: UInt8 = 0
        for character in characters {
            last = table[Int(character)]
            if last & 0xC0 != 0 { return false }
        }
        // The unused low bits of the last character must be zero: 4 of them after 2 characters of a group, 2 after 3.
        switch characters.count % 4 {
        case 0: return true
        case 2: return last & 0x0F == 0
        case 3: return last & 0x03 == 0
        default: return false
        }
    }

    /// Encodes bytes without padding.
    public static func encode<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        String(decoding: encodeBytes(bytes), as: UTF8.self)
    }

    /// Encodes bytes without padding, returning ASCII bytes.
    static func encodeBytes<Bytes: Collection>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var iterator = bytes.makeIterator()
        while let b0 = iterator.next() {
            let b1 = iterator.next()
            let b2 = b1 == nil ? nil : iterator.next()
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            if let b1 {
                out.append(alphabet[Int((b1 & 0x0F) << 2 | (b2 ?? 0) >> 6)])
                if let b2 { out.append(alphabet[Int(b2 & 0x3F)]) }
            }
        }
        return out
    }

    /// Decodes a base64url string strictly; `nil` if it is not canonical base64url.
    public static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decode(UnsafeRawBufferPointer($0)) }
    }

    /// Decodes canonical, unpadded base64url bytes; `nil` on any deviation.
    public static func decode(_ input: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let capacity = decodedCount(input.count) else { return nil }
        var valid = true
        let out = [UInt8](unsafeUninitializedCapacity: capacity) { output, initialized in
            valid = decode(input, into: UnsafeMutableRawBufferPointer(output)) != nil
            // Every byte is written whenever decoding succeeds; on failure the
            // buffer is discarded, so report it fully initialised of zeros.
            if !valid { output.initialize(repeating: 0) }
            initialized = capacity
        }
        return valid ? out : nil
    }

    /// How many bytes `count` base64url characters decode to; `nil` for a length no canonical encoding has.
    @inline(__always)
    public static func decodedCount(_ count: Int) -> Int? {
        count % 4 == 1 ? nil : count / 4 * 3 + max(0, count % 4 - 1)
    }

    /// Decodes canonical, unpadded base64url bytes into the front of `output`, which must hold
    /// `decodedCount(input.count)` bytes; the count written, or `nil` on any deviation (what was
    /// written is then meaningless). No allocation: for the verifier's hot path.
    public static func decode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Int? {
        let count = input.count
        guard let capacity = decodedCount(count), output.count >= capacity else { return nil }
        let table = decodeTable
        var index = 0, written = 0
        while index + 4 <= count {
            let a = table[Int(input[index])], b = table[Int(input[index + 1])]
            let c = table[Int(input[index + 2])], d = table[Int(input[index + 3])]
            if (a | b | c | d) & 0xC0 != 0 { return nil }
            output[written] = a << 2 | b >> 4
            output[written + 1] = b << 4 | c >> 2
            output[written + 2] = c << 6 | d
            index += 4
            written += 3
        }
        switch count - index {
        case 0:
            return written
        case 2:
            let a = table[Int(input[index])], b = table[Int(input[index + 1])]
            // The unused low 4 bits of the last character must be zero.
            if (a | b) & 0xC0 != 0 || b & 0x0F != 0 { return nil }
            output[written] = a << 2 | b >> 4
            return written + 1
        default:  // 3
            let a = table[Int(input[index])], b = table[Int(input[index + 1])], c = table[Int(input[index + 2])]
            // The unused low 2 bits of the last character must be zero.
            if (a | b | c) & 0xC0 != 0 || c & 0x03 != 0 { return nil }
            output[written] = a << 2 | b >> 4
            output[written + 1] = b << 4 | c >> 2
            return written + 2
        }
    }
}
