import Hummingbird
import JOSE

/// Why a request body was not a JSON object.
public enum JSONBodyError: Error, Sendable, Equatable {
    /// Over the limit (413).
    case tooLarge(limit: Int)
    /// Not a strict JSON object; the reader's message says why (400).
    case invalid(String)
}

extension Request {
    /// The body as a strict JSON object (duplicate members, BOM and deep nesting
    /// refused); an empty body is an empty object.
    public func jsonObject(limit: Int) async throws(JSONBodyError) -> JSONObject {
        let buffer: ByteBuffer
        do {
            buffer = try await body.collect(upTo: limit)
        } catch {
            throw .tooLarge(limit: limit)
        }
        if buffer.readableBytes == 0 { return JSONObject() }
        do {
            return try StrictJSONReader().parseObject(Array(buffer.readableBytesView))
        } catch {
            throw .invalid(error.message)
        }
    }
}
