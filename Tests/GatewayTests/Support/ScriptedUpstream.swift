import Foundation
import Glibc
import NIOConcurrencyHelpers

/// A loopback upstream that answers each request with exact bytes a test wrote for its path:
/// the framings, informational answers and malformed heads a well-behaved server never sends.
///
/// Each accepted connection runs on a thread of its own, reads request heads one after another
/// (no request bodies), writes the scripted answer for the head's path, and closes the
/// connection when the script says so or when no answer is scripted.
final class ScriptedUpstream: Sendable {
    struct Answer: Sendable {
        let bytes: [UInt8]
        /// Close the connection after writing the answer (a body read until the close needs it).
        let close: Bool
        /// Close it with a reset (RST) rather than an orderly close: an answer cut off mid-body.
        let reset: Bool

        init(_ text: String, close: Bool = false, reset: Bool = false) {
            bytes = Array(text.utf8)
            self.close = close || reset
            self.reset = reset
        }
    }

    let port: Int
    private let listener: Int32
    private let answers: [String: Answer]
    private let state = NIOLockedValueBox((connections: 0, requests: [String]()))

    /// Connections accepted so far (a reused connection counts once).
    var connectionsAccepted: Int { state.withLockedValue { $0.connections } }
    /// The heads received, in order.
    var requestHeads: [String] { state.withLockedValue { $0.requests } }

    init(answers: [String: Answer]) throws {
        self.answers = answers
        (listener, port) = try LoopbackSocket.listen(backlog: 64)
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Stops accepting; connections still open end when the gateway closes them.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        _ = Glibc.close(listener)
    }

    private func acceptLoop() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            state.withLockedValue { $0.connections += 1 }
            let thread = Thread { [self] in serve(connection) }
            thread.start()
        }
    }

    private func serve(_ connection: Int32) {
        defer { _ = Glibc.close(connection) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            guard let end = Self.headEnd(received) else {
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { return }
                received += buffer[0..<count]
                continue
            }
            let head = String(decoding: received[..<end], as: UTF8.self)
            received.removeFirst(end)
            state.withLockedValue { $0.requests.append(head) }
            let path = head.split(separator: " ").dropFirst().first.map(String.init) ?? ""
            guard let answer = answers[path] else { return }
            let sent = answer.bytes.withUnsafeBufferPointer { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if answer.reset {
                // A zero linger time: close sends RST, and the peer reads ECONNRESET.
                Thread.sleep(forTimeInterval: 0.1)  // the bytes sent go out first
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(connection, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                return
            }
            guard sent == answer.bytes.count, !answer.close else { return }
        }
    }

    /// The length through the head's blank line, once it has arrived.
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 3..<bytes.count where bytes[index - 3] == 13 && bytes[index - 2] == 10 && bytes[index - 1] == 13 && bytes[index] == 10 {
            return index + 1
        }
        return nil
    }
}
