import NIOCore
import NIOHTTP1

/// A gRPC request, as the gateway tells one (its `content-type`), and the form its refusals take.
///
/// A gRPC client reads no HTTP status and no JSON body: it reads `grpc-status` and
/// `grpc-message`. A refused gRPC call is answered HTTP 200 with both in the answer's head and
/// no message (the trailers-only form; over HTTP/2 one `HEADERS` frame ending the stream), so
/// the client's status is the refusal's: 16 `UNAUTHENTICATED` for a missing or bad token, 7
/// `PERMISSION_DENIED` for a policy, 8 `RESOURCE_EXHAUSTED` for a rate limit, and so on.
package enum GRPCRequest {
    /// The request's gRPC content type (`application/grpc`, `+proto`, `+json`, `application/grpc-web`,
    /// `-web+proto`, `-web-text`, ...), in the request's spelling; `nil` for anything else.
    package static func contentType(_ value: String?) -> String? {
        guard let value else { return nil }
        let type = value.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        for base in ["application/grpc", "application/grpc-web", "application/grpc-web-text"]
        where type == base || (type.hasPrefix(base + "+") && type.utf8.count > base.utf8.count + 1) {
            return value
        }
        return nil
    }

    /// The gRPC status code a refusal is read as (grpc/doc/statuscodes.md; the HTTP mapping
    /// of grpc/doc/http-grpc-status-mapping.md where the two meet).
    package static func status(for error: GatewayError) -> Int {
        switch error.status.code {
        case 401: 16  // UNAUTHENTICATED
        case 403: 7  // PERMISSION_DENIED
        case 413, 429: 8  // RESOURCE_EXHAUSTED
        case 404, 405, 415: 12  // UNIMPLEMENTED
        case 408, 504: 4  // DEADLINE_EXCEEDED
        case 502, 503: 14  // UNAVAILABLE
        case 400..<500: 3  // INVALID_ARGUMENT
        default: 13  // INTERNAL
        }
    }

    /// A `grpc-timeout` value (1 to 8 digits and a unit: H, M, S, m, u, n), or `nil` when it is not one.
    package static func timeout(_ value: String) -> TimeAmount? {
        let bytes = Array(value.utf8)
        guard (2...9).contains(bytes.count), let unit = bytes.last, let amount = Int64(String(decoding: bytes.dropLast(), as: UTF8.self)),
            bytes.dropLast().allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        switch unit {
        case UInt8(ascii: "H"): return .hours(amount)
        case UInt8(ascii: "M"): return .minutes(amount)
        case UInt8(ascii: "S"): return .seconds(amount)
        case UInt8(ascii: "m"): return .milliseconds(amount)
        case UInt8(ascii: "u"): return .microseconds(amount)
        case UInt8(ascii: "n"): return .nanoseconds(amount)
        default: return nil
        }
    }

    /// `grpc-message`'s encoding: percent-encoded UTF-8 outside printable ASCII, and `%` itself.
    package static func percentEncoded(_ message: String) -> String {
        var out = ""
        for byte in message.utf8 {
            if byte >= 0x20 && byte <= 0x7E && byte != UInt8(ascii: "%") {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

extension GatewayError {
    /// The refusal as a gRPC client reads it: 200, the request's gRPC content type, `grpc-status`
    /// and `grpc-message` ("code: sentence"), and no body. `Retry-After` and the other fields
    /// the refusal carries go too.
    package func grpcResponseHead(contentType: String, extra: (_ headers: inout HTTPHeaders) -> Void = { _ in }) -> HTTPResponseHead {
        var headers = HTTPHeaders()
        headers.reserveCapacity(8)
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "grpc-status", value: String(GRPCRequest.status(for: self)))
        headers.add(name: "grpc-message", value: GRPCRequest.percentEncoded(code + ": " + message))
        for field in self.headers where field.name != .contentType { headers.add(name: field.name.rawName, value: field.value) }
        headers.add(name: "Content-Length", value: "0")
        extra(&headers)
        return HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
