// libFuzzer target: bytes -> RequestTarget.normalizedPath and queryWithoutCredentials.
// Oracles: a normalised path normalises to itself; it starts with /, holds no
// . or .. segment and no empty segment; it never climbs above / (every ..
// consumed a segment, else the path was refused); the query filter leaves no
// parameter named access_token and is stable when applied again.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestTarget(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let (path, query) = RequestTarget.split(text[...])
    if let normalized = try? RequestTarget.normalizedPath(path) {
        guard normalized.utf8.first == UInt8(ascii: "/") else { fatalError("a normalised path does not start with /") }
        guard let again = try? RequestTarget.normalizedPath(normalized), again.utf8.elementsEqual(normalized.utf8) else {
            fatalError("normalising twice changed the path")
        }
        let segments = normalized.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst()
        for (index, segment) in segments.enumerated() {
            if segment.elementsEqual(".".utf8) || segment.elementsEqual("..".utf8) { fatalError("a dot segment survived") }
            if segment.isEmpty, index != segments.count - 1 { fatalError("an empty segment survived") }
        }
        if normalized.contains("\\") || normalized.lowercased().contains("%2f") || normalized.lowercased().contains("%5c") {
            fatalError("a slash in another spelling survived")
        }
    }
    if let kept = RequestTarget.queryWithoutCredentials(query) {
        // Split at the ASCII bytes, as the filter does: Character comparison is canonical
        // equivalence, under which U+037E equals ";" (the gateway refuses such a query apart,
        // RequestTarget.checkQuery).
        let pieces = kept.utf8.split(whereSeparator: { $0 == UInt8(ascii: "&") || $0 == UInt8(ascii: ";") })
        for piece in pieces where RequestTarget.isCredentialParameter(Substring(piece)) {
            fatalError("access_token survived")
        }
        guard let again = RequestTarget.queryWithoutCredentials(kept), again.utf8.elementsEqual(kept.utf8) else {
            fatalError("filtering the query twice changed it")
        }
    }
    return 0
}
