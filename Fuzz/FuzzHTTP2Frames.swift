// libFuzzer target: bytes -> HTTP/2 frames sent on one connection to a live gateway (started by
// scripts/fuzz.sh: `portcullis serve` with the route /api/svc to `portcullis-probes framing-upstream`),
// after the preface and a SETTINGS frame. Each input byte group is a frame: its type, flags, stream
// and payload chosen by the bytes, a HEADERS payload drawn from well-formed request heads (to the
// API and to the route, with a token or not) or left as the fuzzer's bytes, so that both the
// decoder's refusals and the streams behind it are reached. Oracles: every frame the gateway sends
// back is well framed (its length within the 16 KiB default, a known type), and after every input
// the gateway still answers a fresh HTTP/1.1 request and a fresh HTTP/2 one. The gateway is another
// process: coverage guides the harness, the oracles find what breaks the gateway.
import Glibc

let port = UInt16(getenv("PORTCULLIS_FRAMING_PORT").map { String(cString: $0) } ?? "") ?? 0
let token = getenv("PORTCULLIS_FRAMING_TOKEN").map { String(cString: $0) } ?? ""
let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

func frame(_ type: UInt8, _ flags: UInt8, _ stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
    let length = UInt32(payload.count)
    return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags,
            UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
}

/// A string without Huffman coding: its length as an HPACK integer with a 7-bit prefix (RFC 7541 §5.1), then its bytes.
func hpackString(_ value: String) -> [UInt8] {
    let bytes = Array(value.utf8)
    var length = bytes.count
    guard length >= 127 else { return [UInt8(length)] + bytes }
    var out: [UInt8] = [127]
    length -= 127
    while length >= 128 {
        out.append(UInt8(length % 128 + 128))
        length /= 128
    }
    return out + [UInt8(length)] + bytes
}

/// A field without indexing, the name by its static-table index (RFC 7541 §6.2.2).
func literal(nameIndex: UInt8, _ value: String) -> [UInt8] {
    [nameIndex] + hpackString(value)
}

/// Request heads as HPACK blocks (static-table indexes and literals only: no state between blocks).
/// Bits 4-5 pick a shape the HTTP/1 codec cannot convert or must not be routed by: a request
/// without `:authority`, a `CONNECT`, or an absolute `:path` with a `host` field naming another host.
func requestBlock(_ choice: UInt8) -> [UInt8] {
    let shape = choice >> 4 & 0x3
    if shape == 2 { return literal(nameIndex: 0x02, "CONNECT") + literal(nameIndex: 0x01, "127.0.0.1:1") }  // :method, :authority
    var block: [UInt8] = [choice & 1 == 0 ? 0x82 : 0x83, 0x86]  // :method GET or POST, :scheme http
    let paths = ["/healthz", "/api/svc/x", "/api/svc/../svc/y", "/api/session/create-anonymous", "/nowhere", "/api/svc/%2e%2e/x"]
    let path = paths[Int(choice >> 1) % paths.count]
    block += literal(nameIndex: 0x04, shape == 3 ? "http://other.example" + path : path)  // :path
    if shape != 1 { block += literal(nameIndex: 0x01, "127.0.0.1") }  // :authority
    if shape == 3 { block += [0x0F, 38 - 15] + hpackString("other.example") }  // host (index 38: past the 4-bit prefix)
    if choice & 0x40 != 0 { block += [0x00] + hpackString("authorization") + hpackString("Bearer " + token) }
    if choice & 0x80 != 0 { block += [0x0F, 31 - 15] + hpackString("application/grpc") }  // content-type (index 31)
    return block
}

/// The frames the bytes describe.
func frames(from bytes: [UInt8]) -> [UInt8] {
    var out = preface + frame(4, 0, 0, [])
    var index = 0
    while index + 4 <= bytes.count {
        let type = bytes[index] % 10
        let flags = bytes[index + 1]
        let stream = UInt32(bytes[index + 2] % 8) * 2 + (bytes[index + 2] & 0x80 == 0 ? 1 : 0)
        let length = Int(bytes[index + 3] % 48)
        index += 4
        let raw = Array(bytes[index..<min(bytes.count, index + length)])
        index += raw.count
        let payload = type == 1 && flags & 0x20 == 0 ? requestBlock(raw.first ?? 0) : raw
        out += frame(type, type == 1 ? flags & 0x0D : flags, stream, payload)
    }
    return out
}

func connectToGateway() -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = port.bigEndian
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    if connected != 0 { fatalError("cannot connect to the gateway on 127.0.0.1:\(port): it stopped") }
    return descriptor
}

func sendAll(_ descriptor: Int32, _ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
        let sent = bytes[offset...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if sent <= 0 { return }  // the gateway closed the connection: its answer to what came so far
        offset += sent
    }
}

/// Everything the gateway sends until it closes, goes quiet for `milliseconds`, or `done` says so.
func readAll(_ descriptor: Int32, milliseconds: Int, until done: ([UInt8]) -> Bool = { _ in false }) -> [UInt8] {
    var timeout = timeval(tv_sec: milliseconds / 1000, tv_usec: milliseconds % 1000 * 1000)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while out.count < 4 << 20, !done(out) {
        let count = recv(descriptor, &buffer, buffer.count, 0)
        if count <= 0 { break }
        out += buffer[0..<count]
    }
    return out
}

/// Whether the frames so far hold one on stream 1 that ends it.
func streamOneEnded(_ bytes: [UInt8]) -> Bool {
    var index = 0
    while index + 9 <= bytes.count {
        let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
        if index + 9 + length <= bytes.count, bytes[index + 8] == 1, bytes[index + 5] == 0, bytes[index + 4] & 1 == 1,
            bytes[index + 3] == 0 || bytes[index + 3] == 1
        {
            return true
        }
        index += 9 + length
    }
    return false
}

/// The gateway's bytes read as frames: every frame whole or cut by the close, no frame past 16 KiB, a known type.
func checkFraming(_ bytes: [UInt8]) {
    var index = 0
    while index + 9 <= bytes.count {
        let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
        if length > 16384 { fatalError("the gateway sent a frame of \(length) bytes, past the 16 KiB the client allowed") }
        if bytes[index + 3] > 9 { fatalError("the gateway sent a frame of unknown type \(bytes[index + 3])") }
        index += 9 + length
    }
}

/// The gateway answers a fresh HTTP/1.1 request, and a fresh HTTP/2 one.
func checkStillServing() {
    let http1 = connectToGateway()
    sendAll(http1, Array("GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n".utf8))
    let answer = readAll(http1, milliseconds: 5000)
    close(http1)
    if !answer.starts(with: Array("HTTP/1.1 200".utf8)) { fatalError("after the input, HTTP/1.1 /healthz answered \(String(decoding: answer.prefix(80), as: UTF8.self))") }
    let http2 = connectToGateway()
    sendAll(http2, preface + frame(4, 0, 0, []) + frame(1, 0x05, 1, requestBlock(0)))
    let frames = readAll(http2, milliseconds: 5000, until: streamOneEnded)
    close(http2)
    // A HEADERS frame on stream 1 whose first byte is :status 200 from the static table (0x88).
    var index = 0
    var served = false
    while index + 9 <= frames.count {
        let length = Int(frames[index]) << 16 | Int(frames[index + 1]) << 8 | Int(frames[index + 2])
        if frames[index + 3] == 1, frames[index + 8] == 1, index + 9 < frames.count, frames[index + 9] == 0x88 { served = true }
        index += 9 + length
    }
    if !served { fatalError("after the input, a fresh HTTP/2 /healthz was not answered 200") }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP2Frames(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard port != 0, !token.isEmpty else { fatalError("set PORTCULLIS_FRAMING_PORT and PORTCULLIS_FRAMING_TOKEN (scripts/fuzz.sh does)") }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let descriptor = connectToGateway()
    sendAll(descriptor, frames(from: bytes))
    checkFraming(readAll(descriptor, milliseconds: 100))
    close(descriptor)
    checkStillServing()
    return 0
}
