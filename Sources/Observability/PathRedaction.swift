import JOSE

/// A request path as logs may hold it: a segment that looks like a credential is `[redacted]`,
/// for clients that put a token where a session id belongs (the access log, error messages).
package enum PathRedaction {
    /// The path as it may be logged: a segment that looks like a credential (a
    /// JWT, a refresh token, or anything over 64 bytes) is replaced by `[redacted]`,
    /// for clients that put a token where a session id belongs.
    package static func redactedPath(_ path: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(path.utf8.count)
        appendRedactedPath(path, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `redactedPath(path)` to `out`, as a quoted and escaped JSON string when `json`:
    /// the access log's form, with no string or array made per segment.
    package static func appendRedactedPath(_ path: some StringProtocol, to out: inout [UInt8], json: Bool = false) {
        let bytes = path.utf8
        if json { out.append(UInt8(ascii: "\"")) }
        var start = bytes.startIndex
        var index = start
        while true {
            let atEnd = index == bytes.endIndex
            if atEnd || bytes[index] == UInt8(ascii: "/") {
                let segment = bytes[start..<index]
                if looksLikeCredential(segment) {
                    out.append(contentsOf: "[redacted]".utf8)
                } else if json {
                    JSONWriter.appendEscaped(segment, to: &out)
                } else {
                    out.append(contentsOf: segment)
                }
                if atEnd { break }
                out.append(UInt8(ascii: "/"))
                start = bytes.index(after: index)
            }
            index = bytes.index(after: index)
        }
        if json { out.append(UInt8(ascii: "\"")) }
    }

    /// A JWT (`eyJ` first, or two dots or more), a refresh token (`rt_`), or over 64 bytes.
    private static func looksLikeCredential<Bytes: Collection<UInt8>>(_ segment: Bytes) -> Bool {
        segment.starts(with: "eyJ".utf8) || segment.starts(with: "rt_".utf8) || segment.count > 64
            || segment.lazy.filter { $0 == UInt8(ascii: ".") }.count >= 2
    }
}
