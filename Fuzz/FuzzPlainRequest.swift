// libFuzzer target: bytes -> PlainRequestHead.parse (the data plane's front reads these heads
// without NIO's decoder). The differential against NIO's decoder runs in PlainRequestHeadTests;
// here, the oracles: an unfinished head holds no blank line and stays within the bound; a complete head ends with its blank line inside the bytes; no shorter prefix
// of it is complete; the same head is read from its own bytes alone and from its canonical
// re-spelling; every field read is a token name and a value of visible ASCII with no whitespace
// at either end, none frames a body but one Content-Length of plain digits, and that length is the
// head's `bodyLength` (0 without one); at most one Connection, `keep-alive` or `close` in any case
// (so NIO's decoder and the head's own reading agree on closing after the answer).
let limits = PlainRequestHead.Limits(maximumHeadBytes: 2_048, maximumFieldCount: 32, maximumFieldBytes: 512)

func parse(_ bytes: [UInt8]) -> PlainRequestHead.Outcome {
    bytes.withUnsafeBytes { PlainRequestHead.parse($0, limits: limits) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPlainRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let outcome = parse(bytes)
    if outcome == .incomplete {
        // What the front waits on: never a blank line (the head timeout leaves at one), never past the bound.
        if bytes.count > limits.maximumHeadBytes + 2 { fatalError("an unfinished head of \(bytes.count) bytes, past the bound") }
        for index in 0..<max(0, bytes.count - 1) where bytes[index] == 0x0A {
            if bytes[index + 1] == 0x0A || (index + 2 < bytes.count && bytes[index + 1] == 0x0D && bytes[index + 2] == 0x0A) {
                fatalError("an unfinished head holding a blank line")
            }
        }
    }
    guard case .complete(let head) = outcome else { return 0 }
    if head.length > bytes.count || head.length < 4 { fatalError("a head longer than its bytes") }
    if Array(bytes[(head.length - 4)..<head.length]) != Array("\r\n\r\n".utf8) { fatalError("a head that does not end with its blank line") }
    let own = Array(bytes[..<head.length])
    if parse(own) != .complete(head) { fatalError("the head's own bytes read otherwise") }
    for cut in 0..<head.length {
        if case .complete = parse(Array(own[..<cut])) { fatalError("a prefix of \(cut) bytes read as complete") }
    }
    var canonical = "\(head.method.rawValue) \(head.uri) HTTP/1.1\r\n"
    var lengths: [String] = []
    var connections = 0
    for (name, value) in head.fields {
        if name.isEmpty || !name.utf8.allSatisfy(PlainRequestHead.isTokenByte) { fatalError("a name that is not a token") }
        if !value.utf8.allSatisfy(PlainRequestHead.isValueByte) { fatalError("a value byte outside visible ASCII") }
        if let first = value.utf8.first, first == 0x20 || first == 0x09 { fatalError("whitespace before a value") }
        if let last = value.utf8.last, last == 0x20 || last == 0x09 { fatalError("whitespace after a value") }
        for framing in ["transfer-encoding", "upgrade", "expect"] where name.lowercased() == framing {
            fatalError("a \(framing) field read as plain")
        }
        if name.lowercased() == "content-length" { lengths.append(value) }
        if name.lowercased() == "connection" {
            connections += 1
            if connections > 1 || !["keep-alive", "close"].contains(value.lowercased()) { fatalError("a Connection other than one keep-alive or close read as plain") }
        }
        canonical += "\(name): \(value)\r\n"
    }
    canonical += "\r\n"
    if lengths.count > 1 { fatalError("\(lengths.count) Content-Length fields read as plain") }
    if let length = lengths.first {
        if length.isEmpty || length.count > 15 || !length.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) || (length.count > 1 && length.hasPrefix("0")) {
            fatalError("a Content-Length that is not plain digits read as plain")
        }
        if Int(length) != head.bodyLength { fatalError("a body length other than the field's") }
    } else if head.bodyLength != 0 {
        fatalError("a body length without a Content-Length")
    }
    guard case .complete(let again) = parse(Array(canonical.utf8)) else { fatalError("the canonical spelling is not read") }
    if again.method != head.method || again.uri != head.uri || !again.fields.elementsEqual(head.fields, by: { $0.0 == $1.0 && $0.1 == $1.1 }) {
        fatalError("the canonical spelling reads otherwise")
    }
    return 0
}
