import Synchronization

/// The protected headers a verifier has read, by their exact base64url text.
///
/// Every token one key signs carries one header, byte for byte (`{"alg":…,"kid":…,"typ":…}`), so
/// decoding and strictly reading it once per header instead of once per token is the same work
/// with the same outcome: reading is a pure function of the text. Only what the header reads to
/// is kept, never a decision: the header rules and every other check still run on each token. A
/// header is remembered only after a token carrying it verified, so tokens nobody signed cannot
/// push a signer's header out. Four headers at most (a key and its successor, with room), the
/// least recently used replaced first; a header over 256 characters is never kept.
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

        /// Whether `candidate` is this header's text, byte for byte (both are never empty).
        func isRead(from candidate: UnsafeRawBufferPointer) -> Bool {
            text.count == candidate.count && text.elementsEqual(candidate)
        }
    }

    static let limit = 4
    static let longestText = 256

    /// The nesting limit of the reader the headers were read with: a reader with another limit
    /// may refuse what this one read, so it gets no header from here.
    let maxDepth: Int
    /// Most recently used last.
    private let headers = Mutex<[Header]>([])

    init(maxDepth: Int) {
        self.maxDepth = maxDepth
    }

    /// The header `reader` would read from exactly `text`, if it is known.
    func header(readFrom text: UnsafeRawBufferPointer, by reader: StrictJSONReader) -> Header? {
        guard reader.maxDepth == maxDepth, !text.isEmpty, text.count <= Self.longestText else { return nil }
        return headers.withLock { known in
            guard let index = known.lastIndex(where: { $0.isRead(from: text) }) else { return nil }
            // A header in use stays: with more signers than places, the least recently used goes.
            if index != known.count - 1 { known.append(known.remove(at: index)) }
            return known[known.count - 1]
        }
    }

    /// Remembers what `text` reads to, after a token carrying it verified (read by a reader whose
    /// nesting limit was `readDepth`: another limit's reading is not kept).
    func remember(_ text: UnsafeRawBufferPointer, header: JSONObject, algorithmName: String, readDepth: Int) {
        guard readDepth == maxDepth, !text.isEmpty, text.count <= Self.longestText else { return }
        let read = Header(text: Array(text), header: header, algorithmName: algorithmName)
        let replaced: Header? = headers.withLock { known in
            guard !known.contains(where: { $0.isRead(from: text) }) else { return nil }
            known.append(read)
            return known.count > Self.limit ? known.removeFirst() : nil  // the least recently used
        }
        _ = replaced  // released after the lock
    }

    /// How many headers are known (for tests).
    var count: Int { headers.withLock { $0.count } }
}
