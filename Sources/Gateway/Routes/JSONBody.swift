import DataPlane
import EdgeHTTP
import HTTPTypes
import Hummingbird
import JOSE
import Runtime

/// Reads request bodies as strict JSON objects within the configured size, and writes JSON answers.
struct JSONBody: Sendable {
    let maximumBytes: Int

    /// The request body as a strict JSON object (empty body: empty object); 413 beyond the limit.
    func object(_ request: Request) async throws -> JSONObject {
        do {
            return try await request.jsonObject(limit: maximumBytes)
        } catch .tooLarge(let limit) {
            throw GatewayError(.contentTooLarge, "payload_too_large", "the request body is limited to \(limit) bytes")
        } catch .invalid(let message) {
            throw GatewayError.invalidRequest("the body must be a JSON object: \(message)")
        }
    }

    static func response(_ value: JSONValue, status: HTTPResponse.Status = .ok, noStore: Bool = false) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if noStore {
            headers[.cacheControl] = "no-store"
            headers[HTTPField.Name("Pragma")!] = "no-cache"
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(value))))
    }
}

extension JSONObject {
    /// A required string member, or 400 naming it.
    func requiredString(_ name: String) throws -> String {
        guard let value = self[name] else { throw GatewayError.invalidRequest("\(name) is required") }
        guard let text = value.stringValue, !text.isEmpty else { throw GatewayError.invalidRequest("\(name) must be a non-empty string") }
        return text
    }

    /// An optional string member; 400 if present with another type.
    func optionalString(_ name: String) throws -> String? {
        guard let value = self[name], value != .null else { return nil }
        guard let text = value.stringValue else { throw GatewayError.invalidRequest("\(name) must be a string") }
        return text
    }
}
