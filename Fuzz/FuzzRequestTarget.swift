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
        guard normalized.hasPrefix("/") else { fatalError("a normalised path does not start with /") }
        guard let again = try? RequestTarget.normalizedPath(normalized), again == normalized else {
            fatalError("normalising twice changed the path")
        }
        let segments = normalized.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for (index, segment) in segments.enumerated() {
            if segment == "." || segment == ".." { fatalError("a dot segment survived") }
            if segment.isEmpty, index != segments.count - 1 { fatalError("an empty segment survived") }
        }
        if normalized.contains("\\") || normalized.lowercased().contains("%2f") || normalized.lowercased().contains("%5c") {
            fatalError("a slash in another spelling survived")
        }
    }
    if let kept = RequestTarget.queryWithoutCredentials(query) {
        for piece in kept.split(whereSeparator: { $0 == "&" || $0 == ";" }) where RequestTarget.isCredentialParameter(piece) {
            fatalError("access_token survived")
        }
        if RequestTarget.queryWithoutCredentials(kept) != kept { fatalError("filtering the query twice changed it") }
    }
    return 0
}
