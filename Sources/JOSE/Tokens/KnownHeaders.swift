#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The protected headers a verifier has read, by their exact base64url text.
///
/// Every token one key signs carries one header, byte for byte (`{"alg":…,"kid":…,"typ":…}`), so
/// decoding and strictly reading it once per header instead of once per token is the same work
/// with the same outcome: reading is a pure function of the text. Only what the header reads to
/// is kept, never a decision: the header rules and every other check still run on each token. A
/// header is remembered only after a token carrying it verified, so tokens nobody signed cannot
/// push a signer's header out. Four headers at most (a key and its successor, with room), the
/// oldest replaced first; a header over 256 characters is never kept.
final class KnownHeaders: Sendable {
    /// One header as the strict reader read it.
    final class Header: Sendable {
        /// The base64url text it was read from.
        let text: [UInt8]
        let header: JSONObject
        /// The header's `alg`, as written.
        let algorithmName: String

        init(text: [UInt8], header: JSONObject, algorithmName: String) {
            self.text = text
            self.header = header
            self.algorithmName = algorithmName
        }

        func isRead(from candidate: UnsafeRawBufferPointer) -> Bool {
            guard text.count == candidate.count else { return false }
            return text.withUnsafeBytes { own in
                guard let own = own.baseAddress, let other = candidate.baseAddress else { return own.baseAddress == nil && candidate.baseAddress == nil }
                return memcmp(own, other, candidate.count) == 0
            }
        }
    }

    static let limit = 4
    static let longestText = 256

    /// Newest last.
    private let headers = Mutex<[Header]>([])

    init() {}

    /// The header read from exactly `text`, if it is known.
    func header(readFrom text: UnsafeRawBufferPointer) -> Header? {
        guard !text.isEmpty, text.count <= Self.longestText else { return nil }
        return headers.withLock { known in
            for header in known.reversed() where header.isRead(from: text) { return header }
            return nil
        }
    }

    /// Remembers what `text` reads to, after a token carrying it verified.
    func remember(_ text: UnsafeRawBufferPointer, header: JSONObject, algorithmName: String) {
        guard !text.isEmpty, text.count <= Self.longestText else { return }
        let read = Header(text: Array(text), header: header, algorithmName: algorithmName)
        let replaced: Header? = headers.withLock { known in
            guard !known.contains(where: { $0.isRead(from: text) }) else { return nil }
            known.append(read)
            return known.count > Self.limit ? known.removeFirst() : nil
        }
        _ = replaced  // released after the lock
    }

    /// How many headers are known (for tests).
    var count: Int { headers.withLock { $0.count } }
}
