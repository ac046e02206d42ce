/// The routes of one host class (one exact host, one wildcard, or every host) by path prefix:
/// the longest prefix over a path is found in one lookup per ancestor of the path, whatever the
/// number of routes.
///
/// Prefixes and paths are normalised paths (ASCII, `RequestTarget.normalizedPath`), so a
/// dictionary of `Substring`s compares them as bytes; a hit is still checked byte for byte, so a
/// non-ASCII spelling that Unicode calls equal never matches another prefix.
struct RoutePrefixIndex: Sendable {
    /// Each prefix (`pathPrefix`, no trailing `/`; empty for `/`) and the route table index serving it.
    private var indexByPrefix: [Substring: (index: Int, prefix: Substring)] = [:]
    /// `hasLength[n]`: some prefix is `n` bytes long. Ancestors of other lengths are never looked up,
    /// so one route costs one lookup a request, not one per segment.
    private var hasLength: [Bool] = []

    /// Adds `prefix`, served by the route at `index`; the first route added for a prefix keeps it
    /// (the configuration refuses two with one host and prefix).
    mutating func insert(prefix: String, index: Int) {
        guard indexByPrefix[prefix[...]] == nil else { return }
        indexByPrefix[prefix[...]] = (index, prefix[...])
        let length = prefix.utf8.count
        if hasLength.count <= length { hasLength += repeatElement(false, count: length + 1 - hasLength.count) }
        hasLength[length] = true
    }

    /// The index of the route with the longest prefix over `path` (the path itself, or it up to one
    /// of its `/`), and the part of `path` below that prefix.
    func longestMatch(_ path: Substring) -> (index: Int, remainder: Substring)? {
        let bytes = path.utf8
        var end = bytes.endIndex
        var length = bytes.count
        while true {
            if length < hasLength.count, hasLength[length] {
                let candidate = path[path.startIndex..<end]
                if let entry = indexByPrefix[candidate], entry.prefix.utf8.elementsEqual(candidate.utf8) {
                    return (entry.index, path[end...])
                }
            }
            // The next ancestor: up to the last `/` before `end`.
            guard let slash = bytes[bytes.startIndex..<end].lastIndex(of: UInt8(ascii: "/")) else { return nil }
            length -= bytes.distance(from: slash, to: end)
            end = slash
        }
    }

    /// Whether no route is in it.
    var isEmpty: Bool { indexByPrefix.isEmpty }
}
