import DataPlane
import Foundation
import Hummingbird
import JOSE

/// A file served as it was at start-up: its bytes, its type and a strong ETag.
struct StaticAsset: Sendable {
    let body: ByteBuffer
    let contentType: String
    /// `"sha256-<first 16 bytes of the SHA-256, base64url>"`, computed with libcrypto.
    let etag: String
    /// `public, no-cache` (revalidate with the ETag each time) unless the asset says otherwise.
    let cacheControl: String

    /// Reads `path`; `nil` when it cannot be read.
    init?(path: String, contentType: String) {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        self.init(bytes: Array(data), contentType: contentType, cacheControl: "public, no-cache")
    }

    /// A file compiled into the binary (`Embedded/`); `nil` only if libcrypto cannot hash.
    init?(text: String, contentType: String, cacheControl: String = "public, no-cache") {
        self.init(bytes: Array(text.utf8), contentType: contentType, cacheControl: cacheControl)
    }

    private init?(bytes: [UInt8], contentType: String, cacheControl: String) {
        guard let digest = try? Digest.sha256(bytes) else { return nil }
        body = ByteBuffer(bytes: bytes)
        self.contentType = contentType
        self.cacheControl = cacheControl
        etag = "\"sha256-" + Base64URL.encode(digest.prefix(16)) + "\""
    }

    /// 200 with the body, or 304 when the client's `If-None-Match` names this version.
    func response(for request: Request, extraHeaders: HTTPFields = [:]) -> Response {
        var headers: HTTPFields = [.contentType: contentType, .eTag: etag, .cacheControl: cacheControl]
        headers[.init("X-Content-Type-Options")!] = "nosniff"
        headers.append(contentsOf: extraHeaders)
        if let match = request.headers[.ifNoneMatch], match.split(separator: ",").contains(where: { [etag, "*"].contains($0.trimmingCharacters(in: .whitespaces)) }) {
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
    }
}
