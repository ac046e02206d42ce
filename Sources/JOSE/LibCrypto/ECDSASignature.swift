/// Conversion between JWS ECDSA signatures (raw `r || s`, fixed length) and
/// the DER `ECDSA-Sig-Value` libcrypto speaks.
///
/// A JWS signature must be exactly twice the coordinate length; DER in a
/// token is refused by that length check before any conversion.
enum ECDSASignature {
    /// DER-encodes a raw `r || s` signature; `nil` if the length is wrong.
    static func der(fromRaw raw: UnsafeRawBufferPointer, coordinateLength: Int) -> [UInt8]? {
        withDER(fromRaw: raw, coordinateLength: coordinateLength) { Array($0) }
    }

    /// DER-encodes a raw `r || s` signature into stack memory and passes it to
    /// `body`; `nil` if the length is wrong. No heap allocation on the verify path.
    static func withDER<T>(fromRaw raw: UnsafeRawBufferPointer, coordinateLength: Int, _ body: (UnsafeRawBufferPointer) -> T) -> T? {
        guard raw.count == 2 * coordinateLength else { return nil }
        // SEQUENCE header (up to 3) + two INTEGERs of up to 2 + 1 + coordinateLength bytes.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 3 + 2 * (3 + coordinateLength)) { buffer in
            var cursor = 3  // leave room for the SEQUENCE header, filled in last
            func appendInteger(_ start: Int) {
                var first = start
                let end = start + coordinateLength
                while first < end - 1, raw[first] == 0 { first += 1 }
                let pad = raw[first] & 0x80 != 0 ? 1 : 0
                buffer[cursor] = 0x02
                buffer[cursor + 1] = UInt8(end - first + pad)
                cursor += 2
                if pad == 1 { buffer[cursor] = 0; cursor += 1 }
                for index in first..<end {
                    buffer[cursor] = raw[index]
                    cursor += 1
                }
            }
            appendInteger(0)
            appendInteger(coordinateLength)
            let contentLength = cursor - 3
            let start: Int
            if contentLength < 0x80 {
                start = 1
                buffer[1] = 0x30
                buffer[2] = UInt8(contentLength)
            } else {
                start = 0
                buffer[0] = 0x30
                buffer[1] = 0x81
                buffer[2] = UInt8(contentLength)
            }
            return body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[start..<cursor]))
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
