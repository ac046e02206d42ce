/// Requests of every kind a gateway connection can carry, to send in mixed sequences on one
/// connection and check that every answer is framed for its own request (`StrictAnswerReader`).
///
/// They assume a gateway with the route `/api/svc` to an upstream that answers `GET`/`HEAD`
/// `/item` with a sized body, `GET`/`HEAD` `/stream` with a chunked one, and `POST /item`
/// (the framing tests' upstream, and `scripts/framing-upstream.py` for the fuzz target). Depends
/// on nothing but the standard library (the fuzz target `answer-framing` compiles it alone).
public enum MixedRequest: Int, CaseIterable, Sendable {
    /// Relayed answers (a token): sized and chunked, to GET and HEAD; a body; `Expect: 100-continue`.
    case relayedGET, relayedHEAD, relayedChunkedGET, relayedChunkedHEAD, relayedPOST, relayedExpectContinue
    /// Refused by the data plane (no token): GET and HEAD; a POST whose body is then read and dropped.
    case refusedGET, refusedHEAD, refusedPOST
    /// The gateway's own routes (Hummingbird): GET and HEAD, a refused login, 404 and 405.
    case healthGET, healthHEAD, jwksHEAD, badLogin, notFoundGET, notFoundHEAD, methodNotAllowed

    public var method: String {
        switch self {
        case .relayedGET, .relayedChunkedGET, .refusedGET, .healthGET, .notFoundGET: "GET"
        case .relayedHEAD, .relayedChunkedHEAD, .refusedHEAD, .healthHEAD, .jwksHEAD, .notFoundHEAD: "HEAD"
        case .relayedPOST, .relayedExpectContinue, .refusedPOST, .badLogin: "POST"
        case .methodNotAllowed: "DELETE"
        }
    }

    /// The statuses its answer may have.
    public var statuses: Set<Int> {
        switch self {
        case .relayedGET, .relayedHEAD, .relayedChunkedGET, .relayedChunkedHEAD, .relayedPOST, .relayedExpectContinue, .healthGET, .healthHEAD, .jwksHEAD: [200]
        case .refusedGET, .refusedHEAD, .refusedPOST: [401]
        // 429 once the login limit for this address is reached: as good a test of framing.
        case .badLogin: [400, 429]
        case .notFoundGET, .notFoundHEAD: [404]
        case .methodNotAllowed: [405]
        }
    }

    /// The request's bytes; `token` is a valid access token for the relayed kinds.
    public func bytes(token: String) -> String {
        let bearer = "Authorization: Bearer \(token)\r\n"
        return switch self {
        case .relayedGET: "GET /api/svc/item HTTP/1.1\r\nHost: gw\r\n\(bearer)\r\n"
        case .relayedHEAD: "HEAD /api/svc/item HTTP/1.1\r\nHost: gw\r\n\(bearer)\r\n"
        case .relayedChunkedGET: "GET /api/svc/stream HTTP/1.1\r\nHost: gw\r\n\(bearer)\r\n"
        case .relayedChunkedHEAD: "HEAD /api/svc/stream HTTP/1.1\r\nHost: gw\r\n\(bearer)\r\n"
        case .relayedPOST: "POST /api/svc/item HTTP/1.1\r\nHost: gw\r\n\(bearer)Content-Length: 5\r\n\r\nhello"
        case .relayedExpectContinue: "POST /api/svc/item HTTP/1.1\r\nHost: gw\r\n\(bearer)Expect: 100-continue\r\nContent-Length: 3\r\n\r\nabc"
        case .refusedGET: "GET /api/svc/item HTTP/1.1\r\nHost: gw\r\n\r\n"
        case .refusedHEAD: "HEAD /api/svc/item HTTP/1.1\r\nHost: gw\r\n\r\n"
        case .refusedPOST: "POST /api/svc/item HTTP/1.1\r\nHost: gw\r\nContent-Length: 7\r\n\r\nrefused"
        case .healthGET: "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n"
        case .healthHEAD: "HEAD /healthz HTTP/1.1\r\nHost: gw\r\n\r\n"
        case .jwksHEAD: "HEAD /.well-known/jwks.json HTTP/1.1\r\nHost: gw\r\n\r\n"
        case .badLogin: "POST /api/auth/login HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
        case .notFoundGET: "GET /nowhere HTTP/1.1\r\nHost: gw\r\n\r\n"
        case .notFoundHEAD: "HEAD /nowhere HTTP/1.1\r\nHost: gw\r\n\r\n"
        case .methodNotAllowed: "DELETE /healthz HTTP/1.1\r\nHost: gw\r\n\r\n"
        }
    }

    /// Whether a 1xx may come before its answer.
    public var mayHaveInterim: Bool { self == .relayedExpectContinue }
}

/// The last request of a sequence: each ends the connection, in its own way.
public enum MixedEnding: Int, CaseIterable, Sendable {
    /// `Connection: close` on a request the gateway answers 200.
    case close
    /// A target no route may see (`/../x`): 400 `invalid_request`, then the connection closes.
    case refusedTarget
    /// Bytes that are not HTTP/1.1: 400, then the connection closes.
    case unparsable
    /// `Upgrade: h2c` on `/healthz` (an upgrade the gateway does not perform): answered as plain
    /// HTTP/1.1, then the connection closes (NIO's parser reads nothing after an upgrade request).
    case upgradeH2C
    /// A WebSocket upgrade to a proxied route that is not the agent socket: answered as that
    /// route's plain request (401 without a token), then the connection closes.
    case upgradeWebSocketToRoute

    public var method: String { "GET" }
    public var statuses: Set<Int> {
        switch self {
        case .close, .upgradeH2C: [200]
        case .refusedTarget, .unparsable: [400]
        case .upgradeWebSocketToRoute: [401]
        }
    }

    public var bytes: String {
        switch self {
        case .close: "GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n"
        case .refusedTarget: "GET /../x HTTP/1.1\r\nHost: gw\r\n\r\n"
        case .unparsable: "GET /healthz HTTP/1.1\r\nHost: gw\r\nBad Field: x\r\n\r\n"
        case .upgradeH2C: "GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
        case .upgradeWebSocketToRoute:
            "GET /api/svc/item HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        }
    }
}

/// A sequence of requests for one connection, and how it is sent.
public struct MixedSequence: Sendable, CustomStringConvertible {
    public var requests: [MixedRequest]
    public var ending: MixedEnding
    /// All at once (pipelined), or each after the answer before it.
    public var pipelined: Bool

    public init(requests: [MixedRequest], ending: MixedEnding, pipelined: Bool) {
        self.requests = requests
        self.ending = ending
        self.pipelined = pipelined
    }

    /// A sequence drawn from `bytes` (a fuzzer's input): the first byte chooses the mode and the
    /// ending, each later one a request; at most `maximumCount` requests.
    public init(bytes: [UInt8], maximumCount: Int = 24) {
        let first = bytes.first ?? 0
        pipelined = first & 1 == 1
        ending = MixedEnding.allCases[Int(first >> 1) % MixedEnding.allCases.count]
        requests = bytes.dropFirst().prefix(maximumCount).map { MixedRequest.allCases[Int($0) % MixedRequest.allCases.count] }
    }

    /// A random sequence of 1 to `maximumCount` requests.
    public init(using generator: inout some RandomNumberGenerator, maximumCount: Int = 12) {
        let count = Int.random(in: 1...maximumCount, using: &generator)
        requests = (0..<count).map { _ in MixedRequest.allCases.randomElement(using: &generator) ?? .healthGET }
        ending = MixedEnding.allCases.randomElement(using: &generator) ?? .close
        pipelined = Bool.random(using: &generator)
    }

    /// The methods of the requests in order, the ending's last.
    public var methods: [String] { requests.map(\.method) + [ending.method] }
    /// The statuses their answers may have, in order.
    public var statuses: [Set<Int>] { requests.map(\.statuses) + [ending.statuses] }

    public var description: String {
        "\(pipelined ? "pipelined" : "one by one"): " + (requests.map { "\($0)" } + ["\(ending)"]).joined(separator: ", ")
    }

    /// Checks `answers` (read with `StrictAnswerReader`) against the sequence: one per request,
    /// each with its status and no interim answer where none may come; the first problem, or `nil`.
    public func problem(with answers: [StrictAnswerReader.Answer]) -> String? {
        guard answers.count == statuses.count else { return "\(answers.count) answers to \(statuses.count) requests: \(answers.map(\.status))" }
        for (index, answer) in answers.enumerated() {
            if !statuses[index].contains(answer.status) {
                return "answer \(index + 1) is \(answer.status), not \(statuses[index].sorted()): statuses \(answers.map(\.status))"
            }
            let mayHaveInterim = index < requests.count && requests[index].mayHaveInterim
            if !answer.interim.isEmpty && !(mayHaveInterim && answer.interim == [100]) { return "answer \(index + 1) came after interim \(answer.interim)" }
            if answer.readUntilClose { return "answer \(index + 1) has no framing (read until the close)" }
            if methods[index] == "HEAD", answer.field("content-length") == nil, answer.field("transfer-encoding") == nil, answer.status != 204 {
                return "answer \(index + 1) to HEAD says nothing of the GET's framing"
            }
        }
        return nil
    }
}

/// SplitMix64: a seeded generator, so a failing random sequence can be drawn again from its seed.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

#if canImport(Glibc)
import Glibc

extension MixedSequence {
    /// Sends the sequence on a connected socket (its receive timeout set by the caller) as
    /// `pipelined` says, reads every answer strictly until the peer closes, and checks them:
    /// the first problem, or `nil`. `token` is a valid access token for the relayed kinds.
    public func problem(sentOn descriptor: Int32, token: String) -> String? {
        func send(_ text: String) {
            _ = text.utf8CString.withUnsafeBufferPointer { Glibc.send(descriptor, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) }
        }
        func readSome() -> [UInt8] {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let count = read(descriptor, &buffer, buffer.count)
            return count > 0 ? Array(buffer[0..<count]) : []
        }
        let texts = requests.map { $0.bytes(token: token) } + [ending.bytes]
        var bytes: [UInt8] = []
        var answers: [StrictAnswerReader.Answer] = []
        do throws(StrictAnswerReader.Failure) {
            if pipelined {
                send(texts.joined())
                while case let more = readSome(), !more.isEmpty { bytes += more }
                answers = try StrictAnswerReader.readAll(bytes, methods: methods)
            } else {
                var position = 0
                for (index, text) in texts.enumerated() {
                    send(text)
                    // Reads until this request's answer is whole (or the peer closes).
                    while true {
                        let more = readSome()
                        bytes += more
                        if let (answer, next) = try StrictAnswerReader.read(bytes, at: position, method: methods[index], closed: more.isEmpty) {
                            answers.append(answer)
                            position = next
                            break
                        }
                        if more.isEmpty { break }
                    }
                }
                while case let more = readSome(), !more.isEmpty { bytes += more }
                if position < bytes.count { return "\(bytes.count - position) stray bytes after the last answer" }
            }
        } catch {
            return "\(error) (answers so far: \(answers.map(\.status)))"
        }
        return problem(with: answers).map { "\($0) (\(bytes.count) bytes read, the last: \(StrictAnswerReader.printable(bytes.suffix(120))))" }
    }
}
#endif
