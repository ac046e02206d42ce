/// Conversion between JWS ECDSA signatures (raw `r || s`, fixed length) and
/// the DER `ECDSA-Sig-Value` libcrypto speaks.
///
/// A JWS signature must be exactly twice the coordinate length; DER in a
/// token is refused by that length check before any conversion.
enum ECDSASignature {
    /// DER-encodes a raw `r || s` signature; `nil` if the length is wrong.
    static func der(fromRaw raw: UnsafeRawBufferPointer, coordinateLength: Int) -> [UInt8]? {
        guard raw.count == 2 * coordinateLength else { return nil }
        let r = integer(UnsafeRawBufferPointer(rebasing: raw[0..<coordinateLength]))
        let s = integer(UnsafeRawBufferPointer(rebasing: raw[coordinateLength...]))
        var out: [UInt8] = [0x30]
        appendLength(r.count + s.count, to: &out)
        out += r
        out += s
        return out
    }

    /// A DER INTEGER for an unsigned big-endian value: leading zeros stripped,
    /// one zero added when the top bit is set.
    private static func integer(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var start = 0
        while start < bytes.count - 1, bytes[start] == 0 { start += 1 }
        var body = Array(bytes[start...])
        if body[0] & 0x80 != 0 { body.insert(0, at: 0) }
        var out: [UInt8] = [0x02]
        appendLength(body.count, to: &out)
        return out + body
    }

    private static func appendLength(_ length: Int, to out: inout [UInt8]) {
        if length < 0x80 {
            out.append(UInt8(length))
        } else {
            out.append(0x81)
            out.append(UInt8(length))
        }
    }

    /// Converts libcrypto's DER signature to raw `r || s`; `nil` if it is not
    /// the DER this module expects.
    static func raw(fromDER der: [UInt8], coordinateLength: Int) -> [UInt8]? {
        var index = 0
        func readLength() -> Int? {
            guard index < der.count else { return nil }
            let first = der[index]
            index += 1
            if first < 0x80 { return Int(first) }
            guard first == 0x81, index < der.count else { return nil }
            defer { index += 1 }
            return Int(der[index])
        }
        func readInteger() -> [UInt8]? {
            guard index < der.count, der[index] == 0x02 else { return nil }
            index += 1
            guard let length = readLength(), length > 0, index + length <= der.count else { return nil }
            var value = Array(der[index..<index + length])
            index += length
            while value.count > 1, value[0] == 0 { value.removeFirst() }
            guard value.count <= coordinateLength else { return nil }
            return [UInt8](repeating: 0, count: coordinateLength - value.count) + value
        }
        guard der.first == 0x30 else { return nil }
        index = 1
        guard let total = readLength(), index + total == der.count,
            let r = readInteger(), let s = readInteger(), index == der.count
        else { return nil }
        return r + s
    }
}
