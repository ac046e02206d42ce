import Foundation
import Glibc
import JOSE
import PortcullisTestSupport

/// Sends one WebSocket upgrade request over a plain TCP socket and reads the
/// whole answer: the refusal tests need the real status line and body, which a
/// WebSocket client library hides.
struct RawUpgrade {
    struct Answer {
        let status: Int
        let head: String
        let body: String
        var json: JSONObject { (try? StrictJSONReader().parseObject(Array(body.utf8))) ?? JSONObject() }
        var error: String? { json["error"]?.stringValue }
    }

    /// Connects and writes the upgrade request; the caller reads and closes.
    static func connectAndRequest(port: Int, target: String, headers: [(String, String)], host: String? = nil) throws -> Int32 {
        let descriptor = try RawConnection(port: port).descriptor
        var request = "GET \(target) HTTP/1.1\r\nHost: \(host ?? "127.0.0.1:\(port)")\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        request += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        _ = request.utf8CString.withUnsafeBufferPointer { write(descriptor, $0.baseAddress, $0.count - 1) }
        return descriptor
    }

    static func send(port: Int, target: String, headers: [(String, String)] = [], host: String? = nil) throws -> Answer {
        let descriptor = try connectAndRequest(port: port, target: target, headers: headers, host: host)
        defer { close(descriptor) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count <= 0 { break }
            received.append(contentsOf: buffer[0..<count])
            // A 101 keeps the connection open: stop at the end of its head.
            if let text = String(bytes: received, encoding: .utf8), text.hasPrefix("HTTP/1.1 101"), text.contains("\r\n\r\n") { break }
        }
        let text = String(decoding: received, as: UTF8.self)
        let parts = text.components(separatedBy: "\r\n\r\n")
        let head = parts.first ?? ""
        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        return Answer(status: status, head: head, body: parts.dropFirst().joined(separator: "\r\n\r\n"))
    }
}
