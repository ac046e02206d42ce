// libFuzzer target: bytes -> UpstreamResponseParser (the data plane's framing of an upstream's answers).
// The first byte picks where the rest is split into two reads, and whether the request was HEAD.
// Oracles: the split never changes what is reported (heads, body bytes, ends, the error's code);
// every body range lies inside the read it came from; a body is reported only after a head and
// before its end; with a Content-Length framing, exactly that many body bytes precede the end.
struct Outcome: Equatable {
    var statuses: [Int] = []
    var body: [UInt8] = []
    var ends = 0
    var error: String?
}

func run(_ bytes: [UInt8], splitAt split: Int, toHEAD: Bool) -> Outcome {
    var parser = UpstreamResponseParser(maximumHeadBytes: 2_048, maximumFieldCount: 32)
    parser.expectResponse(toHEAD: toHEAD)
    var outcome = Outcome()
    var expectedLength: Int?
    var inBody = false
    for piece in [Array(bytes[..<split]), Array(bytes[split...])] where !piece.isEmpty {
        do {
            try piece.withUnsafeBytes { raw in
                try parser.parse(raw) { event in
                    switch event {
                    case .head(let head):
                        if inBody { fatalError("a head inside a body") }
                        outcome.statuses.append(head.status)
                        if case .length(let length) = head.framing { expectedLength = outcome.body.count + length }
                        inBody = true
                    case .body(let range):
                        if !inBody { fatalError("a body without a head") }
                        if range.lowerBound < 0 || range.upperBound > piece.count { fatalError("a body range outside its read") }
                        outcome.body += piece[range]
                    case .end:
                        if !inBody { fatalError("an end without a head") }
                        if let expectedLength, expectedLength != outcome.body.count { fatalError("a sized body of the wrong length") }
                        expectedLength = nil
                        inBody = false
                        outcome.ends += 1
                    }
                }
            }
        } catch {
            outcome.error = (error as? UpstreamResponseError)?.code ?? "other"
            break
        }
    }
    return outcome
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzUpstreamResponse(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let control = data[0]
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let toHEAD = control & 0x80 != 0
    let whole = run(bytes, splitAt: bytes.count, toHEAD: toHEAD)
    let split = bytes.isEmpty ? 0 : Int(control & 0x7F) % (bytes.count + 1)
    let parts = run(bytes, splitAt: split, toHEAD: toHEAD)
    if whole != parts { fatalError("splitting the bytes changed the outcome") }
    return 0
}
