// libFuzzer target: bytes -> a sequence of mixed requests (MixedSequence) sent on one connection
// to a live gateway (started by scripts/fuzz.sh: `portcullis serve` with the route /api/svc to
// `portcullis-probes framing-upstream`), every answer read by StrictAnswerReader told its request's
// method; a problem (an answer framed for another request, a stray byte, a wrong status) stops the
// run. The same bytes also drive OwedAnswers (the books RequestTargetHandler keeps) against a plain
// array. Coverage guides the harness, the reader and the books; the gateway is another process.
import Glibc

let port = UInt16(getenv("PORTCULLIS_FRAMING_PORT").map { String(cString: $0) } ?? "") ?? 0
let token = getenv("PORTCULLIS_FRAMING_TOKEN").map { String(cString: $0) } ?? ""

/// The books against a model: each input byte is an event (a request passed on, HEAD or not; an answer ended).
func checkOwedAnswers(_ bytes: [UInt8]) {
    var books = OwedAnswers()
    var model: [Bool] = []
    for byte in bytes {
        switch byte % 3 {
        case 0, 1:
            books.owe(isHEAD: byte % 3 == 1)
            model.append(byte % 3 == 1)
        default:
            books.settle()
            if !model.isEmpty { model.removeFirst() }
        }
        if books.count != model.count { fatalError("the books owe \(books.count) answers, the model \(model.count)") }
        if books.currentAnswersHEAD != (model.first ?? false) { fatalError("the books frame the current answer for another request") }
    }
}

/// One connection to the gateway: sends `sequence`, reads every answer; the first problem, or nil.
func problem(with sequence: MixedSequence) -> String? {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return "no socket" }
    defer { close(descriptor) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = port.bigEndian
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { fatalError("cannot connect to the gateway on 127.0.0.1:\(port)") }
    return sequence.problem(sentOn: descriptor, token: token)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAnswerFraming(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    checkOwedAnswers(bytes)
    guard port != 0, !token.isEmpty else { fatalError("set PORTCULLIS_FRAMING_PORT and PORTCULLIS_FRAMING_TOKEN (scripts/fuzz.sh does)") }
    let sequence = MixedSequence(bytes: bytes, maximumCount: 12)
    if let problem = problem(with: sequence) { fatalError("\(sequence): \(problem)") }
    return 0
}
