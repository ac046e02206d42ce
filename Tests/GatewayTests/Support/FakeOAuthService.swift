import Foundation
import Hummingbird
import JOSE
import Logging
import Synchronization

/// A service people connect their account at (the gateway its OAuth client), on loopback: an
/// authorization endpoint that approves at once for the person it is told is signed in there, a
/// token endpoint that checks the client's secret, the redirect URI and the PKCE verifier and
/// issues access and refresh tokens of its own, and an API (`/api/user`) that answers who a token
/// belongs to, as GitHub's `/user` does (and `/api/slow`, which answers after five seconds).
final class FakeOAuthService: Sendable {
    struct Issued: Sendable {
        let person: String
        let redirectURI: String
        let challenge: String
        let scope: String
    }

    struct Books: Sendable {
        var clientSecret = "service-secret-of-portcullis"
        /// Who is signed in at the service (the person who approves next).
        var person = "octocat"
        /// The authorization endpoint answers `error=access_denied`.
        var denies = false
        var codes: [String: Issued] = [:]
        /// Access token -> person.
        var accessTokens: [String: String] = [:]
        var refreshTokens: [String: String] = [:]
        var tokenRequests = 0
        /// Refreshes answered (`grant_type=refresh_token`), refused ones included.
        var refreshRequests = 0
        /// The `expires_in` of the access tokens it issues.
        var tokenLifetime = 28_800
        /// Tokens revoked at `/login/oauth/revoke` (RFC 7009), with their hint.
        var revoked: [(token: String, hint: String)] = []
        /// The last authorization request's query, for checks.
        var lastAuthorization: [String: String] = [:]
        /// The `iss` its way back carries (RFC 9207); `nil`: none, as GitHub's.
        var namesItself: String? = nil
    }

    let server: BackgroundServer
    let books = Mutex(Books())
    var port: Int { server.port }
    var base: String { "http://127.0.0.1:\(port)" }

    private init(server: BackgroundServer) { self.server = server }

    static func start() async throws -> FakeOAuthService {
        let box = Mutex<FakeOAuthService?>(nil)
        let router = Router()
        router.get("/login/oauth/authorize") { request, _ -> Response in
            guard let service = box.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            let query = Self.fields(request.uri.query ?? "")
            guard query["response_type"] == "code", query["client_id"] == "portcullis-connect", let redirect = query["redirect_uri"],
                let state = query["state"], query["code_challenge_method"] == "S256", let challenge = query["code_challenge"]
            else { return Response(status: .badRequest) }
            let (denies, person, iss) = service.books.withLock { books in
                books.lastAuthorization = query
                return (books.denies, books.person, books.namesItself)
            }
            var items = [URLQueryItem(name: "state", value: state)]
            if let iss { items.append(URLQueryItem(name: "iss", value: iss)) }
            if denies {
                items.append(URLQueryItem(name: "error", value: "access_denied"))
            } else {
                let code = "code-" + UUID().uuidString
                service.books.withLock {
                    $0.codes[code] = Issued(person: person, redirectURI: redirect, challenge: challenge, scope: query["scope"] ?? "")
                }
                items.append(URLQueryItem(name: "code", value: code))
            }
            var back = URLComponents(string: redirect)
            back?.queryItems = items
            return Response(status: .found, headers: [.location: back?.string ?? redirect])
        }
        router.post("/login/oauth/access_token") { request, _ -> Response in
            guard let service = box.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            let form = Self.fields(String(buffer: try await request.body.collect(upTo: 65_536)))
            return try service.tokenAnswer(form: form, authorization: request.headers[.authorization])
        }
        router.post("/login/oauth/revoke") { request, _ -> Response in
            guard let service = box.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            let form = Self.fields(String(buffer: try await request.body.collect(upTo: 65_536)))
            let secret = service.books.withLock { $0.clientSecret }
            guard request.headers[.authorization] == "Basic " + Data("portcullis-connect:\(secret)".utf8).base64EncodedString() else {
                return Response(status: .unauthorized)
            }
            guard let token = form["token"] else { return Response(status: .badRequest) }
            service.books.withLock { books in
                books.revoked.append((token, form["token_type_hint"] ?? ""))
                // A refresh token's revocation ends the access tokens of its grant too (RFC 7009 2.1).
                if let person = books.refreshTokens.removeValue(forKey: token) {
                    books.accessTokens = books.accessTokens.filter { $0.value != person }
                }
                books.accessTokens[token] = nil
            }
            return Response(status: .ok)
        }
        router.get("/api/user") { request, _ -> Response in
            guard let service = box.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            let token = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil } ?? ""
            guard let person = service.books.withLock({ $0.accessTokens[token] }) else { return Response(status: .unauthorized) }
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"login":"\#(person)"}"#)))
        }
        // A call that takes its time (five seconds), for requests under way when access ends.
        router.get("/api/slow") { request, _ -> Response in
            try await Task.sleep(for: .seconds(5))
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"slow":true}"#)))
        }
        let server = try await BackgroundServer.start { onPort in
            Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { await onPort($0.localAddress?.port ?? 0) }, logger: Logger(label: "test.oauth-service"))
        }
        let service = FakeOAuthService(server: server)
        box.withLock { $0 = service }
        return service
    }

    func stop() async throws { try await server.stop() }

    private func tokenAnswer(form: [String: String], authorization: String?) throws -> Response {
        func error(_ code: String, status: HTTPResponse.Status = .badRequest) -> Response {
            Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"error":"\#(code)"}"#)))
        }
        let secret = books.withLock { books in
            books.tokenRequests += 1
            return books.clientSecret
        }
        guard authorization == "Basic " + Data("portcullis-connect:\(secret)".utf8).base64EncodedString() else { return error("invalid_client", status: .unauthorized) }
        if form["grant_type"] == "refresh_token" {
            // Rotating, as GitHub Apps do: the refresh token is good once, and the old access token ends with it.
            guard let token = form["refresh_token"], let person = books.withLock({ books -> String? in
                books.refreshRequests += 1
                guard let person = books.refreshTokens.removeValue(forKey: token) else { return nil }
                books.accessTokens = books.accessTokens.filter { $0.value != person }
                return person
            }) else { return error("invalid_grant") }
            return issue(to: person, scope: "repo read:org")
        }
        guard form["grant_type"] == "authorization_code", let code = form["code"], let issued = books.withLock({ $0.codes.removeValue(forKey: code) }) else {
            return error("invalid_grant")
        }
        guard form["redirect_uri"] == issued.redirectURI, let verifier = form["code_verifier"],
            Base64URL.encode(try Digest.sha256(Array(verifier.utf8))) == issued.challenge
        else { return error("invalid_grant") }
        return issue(to: issued.person, scope: issued.scope)
    }

    private func issue(to person: String, scope: String) -> Response {
        let access = "svc_at_" + UUID().uuidString
        let refresh = "svc_rt_" + UUID().uuidString
        let lifetime = books.withLock { books in
            books.accessTokens[access] = person
            books.refreshTokens[refresh] = person
            return books.tokenLifetime
        }
        let answer: JSONObject = [
            "access_token": .string(access), "token_type": "bearer", "expires_in": .number(Double(lifetime)), "refresh_token": .string(refresh),
            "scope": .string(scope),
        ]
        return Response(
            status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(.object(answer)))))
    }

    /// A query or form's fields (`+` as a space), the first of a name kept.
    static func fields(_ text: String) -> [String: String] {
        var components = URLComponents()
        components.percentEncodedQuery = text.replacingOccurrences(of: "+", with: "%20")
        return Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
    }
}
