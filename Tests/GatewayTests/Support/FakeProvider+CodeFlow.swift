import Foundation
import Hummingbird
import JOSE
import Synchronization

/// The fake provider's OpenID Connect code flow: a login page, the redirect back with a code,
/// and a token endpoint that checks the client's secret, the redirect URI and the PKCE
/// verifier, returns ID tokens (which a test may spoil) and refresh tokens it can revoke.
extension FakeProvider {
    /// A way the next ID token is made wrong.
    enum IDTokenFault: Sendable {
        case none, wrongNonce, wrongAudience, badSignature, expired
    }

    struct IssuedCode: Sendable {
        let clientID: String
        let redirectURI: String
        let challenge: String
        let nonce: String
        let subject: String
        let sid: String
    }

    struct CodeFlow: Sendable {
        var clientSecret = "s3cret-of-the-client"
        /// When set, the client authenticates with private_key_jwt signed by this key instead of the secret.
        var clientKey: JWSKey?
        /// Who signs in at the login page.
        var subject = "user-1"
        var sid = "sid-1"
        var fault = IDTokenFault.none
        /// More claims for the ID tokens it makes (email, groups).
        var idTokenClaims: JSONObject = [:]
        /// The authorization endpoint answers `error=access_denied` instead of a code.
        var deniesAccess = false
        var givesRefreshTokens = true
        var sendsIssuer = true
        var codes: [String: IssuedCode] = [:]
        /// Refresh token -> (subject, sid); a revoked one is gone.
        var refreshTokens: [String: (subject: String, sid: String)] = [:]
        var tokenRequests = 0
        var refreshRequests = 0
        /// While set, a refresh request waits at the provider until it is cleared (a slow provider, for races).
        var holdsRefreshes = false
        /// Refresh requests that reached the provider (held or not).
        var heldRefreshes = 0
        /// Users deleted at the provider: their refreshes are answered 400 with an empty body, as
        /// the provider a new user tried answers them (no `error` code at all).
        var deletedSubjects: Set<String> = []
        /// When set, every refresh is answered with this status and an empty body (503, 429: an outage).
        var refreshStatus: Int?
        /// When set, a refresh returns an ID token for this subject instead of the session's.
        var refreshSubject: String?
        /// The last token request's form, for checks (never printed).
        var lastForm: [String: String] = [:]
        var lastAuthorization: String?
        /// Access tokens it gave (by code or refresh): token -> (subject, expiry).
        var accessTokens: [String: (subject: String, expiresAt: Double)] = [:]
        var accessTokenLifetime: Double = 300
        /// Token exchanges (RFC 8693, or Entra's on-behalf-of) asked for, and the tokens they gave: token -> (subject, audience).
        var exchangeRequests = 0
        var exchanged: [String: (subject: String, audience: String)] = [:]
        var exchangeLifetime: Double = 300
        /// When set, an exchange is refused with this OAuth error (400).
        var exchangeRefusal: String?
        /// When set, an exchange is answered with this status and an empty body (an outage).
        var exchangeStatus: Int?
    }

    var authorizationPath: String { "/realms/acme/protocol/openid-connect/auth" }

    /// The redirect back to the gateway the login page's button leads to, for a flow's authorization URL.
    func approvalURL(for authorizationURL: String) -> String {
        authorizationURL.replacingOccurrences(of: authorizationPath + "?", with: authorizationPath + "/approve?")
    }

    /// Ends every refresh token of `subject` (the user was disabled at the provider).
    func revokeRefreshTokens(of subject: String) {
        flow.withLock { state in state.refreshTokens = state.refreshTokens.filter { $0.value.subject != subject } }
    }

    /// A back-channel logout token for this provider (OpenID Connect Back-Channel Logout 1.0, 2.4).
    func logoutToken(
        sid: String? = "sid-1", sub: String? = "user-1", aud: String = "portcullis", jti: String = UUID().uuidString, typ: String? = "logout+jwt",
        issuedAgo: Double = 0, events: JSONValue? = nil, more: JSONObject = [:], key: JWSKey? = nil
    ) throws -> String {
        let key = try key ?? keys.first.orThrow()
        let now = Date().timeIntervalSince1970.rounded(.down) - issuedAgo
        var claims: JSONObject = [
            "iss": .string(issuer), "aud": .string(aud), "iat": .number(now), "exp": .number(now + 120), "jti": .string(jti),
            "events": events ?? ["http://schemas.openid.net/event/backchannel-logout": [:]],
        ]
        if let sid { claims["sid"] = .string(sid) }
        if let sub { claims["sub"] = .string(sub) }
        // A null in `more` leaves the claim out (an older provider's token without exp, say).
        for member in more.members { claims[member.name] = member.value == .null ? JSONValue?.none : member.value }
        var header: JSONObject = ["alg": .string(key.algorithm.rawValue), "kid": .string(key.kid)]
        if let typ { header["typ"] = .string(typ) }
        return try JWSCompact.sign(header: header, payload: JSONWriter.bytes(.object(claims)), key: key)
    }

    static func addCodeFlowRoutes(_ router: Router<BasicRequestContext>, box: Box) {
        // The login page: a form whose button approves, as a provider's page would after a password.
        router.get("/realms/acme/protocol/openid-connect/auth") { request, _ -> Response in
            let inputs = (URLComponents(string: "http://x" + request.uri.description)?.queryItems ?? []).map { item in
                "<input type=\"hidden\" name=\"\(html(item.name))\" value=\"\(html(item.value ?? ""))\">"
            }.joined()
            let page = """
                <!doctype html><title>Acme SSO</title><h1>Acme SSO</h1>
                <form method="get" action="auth/approve">\(inputs)<button id="approve" type="submit">Sign in</button></form>
                """
            return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: page)))
        }
        router.get("/realms/acme/protocol/openid-connect/auth/approve") { request, _ -> Response in
            guard let provider = box.provider else { return Response(status: .serviceUnavailable) }
            let query = Dictionary(
                (URLComponents(string: "http://x" + request.uri.description)?.queryItems ?? []).map { ($0.name, $0.value ?? "") },
                uniquingKeysWith: { first, _ in first })
            guard let redirect = query["redirect_uri"], let state = query["state"], let clientID = query["client_id"],
                query["code_challenge_method"] == "S256", let challenge = query["code_challenge"], let nonce = query["nonce"]
            else { return Response(status: .badRequest) }
            var back = URLComponents(string: redirect)
            let (denies, sendsIssuer) = provider.flow.withLock { ($0.deniesAccess, $0.sendsIssuer) }
            var items = [URLQueryItem(name: "state", value: state)]
            if denies {
                items.append(URLQueryItem(name: "error", value: "access_denied"))
            } else {
                let code = UUID().uuidString
                provider.flow.withLock { state in
                    state.codes[code] = IssuedCode(
                        clientID: clientID, redirectURI: redirect, challenge: challenge, nonce: nonce, subject: state.subject, sid: state.sid)
                }
                items.append(URLQueryItem(name: "code", value: code))
            }
            if sendsIssuer { items.append(URLQueryItem(name: "iss", value: provider.issuer)) }
            back?.queryItems = items
            return Response(status: .found, headers: [.location: back?.string ?? redirect])
        }
        router.post("/realms/acme/protocol/openid-connect/token") { request, _ -> Response in
            guard let provider = box.provider else { return Response(status: .serviceUnavailable) }
            let body = try await request.body.collect(upTo: 65_536)
            var components = URLComponents()
            components.percentEncodedQuery = String(buffer: body).replacingOccurrences(of: "+", with: "%20")
            let form = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
            if form["grant_type"] == "refresh_token" {
                provider.flow.withLock { $0.heldRefreshes += 1 }
                while provider.flow.withLock({ $0.holdsRefreshes }) { try await Task.sleep(for: .milliseconds(20)) }
            }
            return try provider.tokenAnswer(form: form, authorization: request.headers[.authorization])
        }
    }

    private func tokenAnswer(form: [String: String], authorization: String?) throws -> Response {
        func error(_ code: String, status: HTTPResponse.Status = .badRequest) -> Response {
            Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"error":"\#(code)"}"#)))
        }
        let (secret, clientKey) = flow.withLock { state in
            state.tokenRequests += 1
            state.lastForm = form
            state.lastAuthorization = authorization
            return (state.clientSecret, state.clientKey)
        }
        if let clientKey {
            guard authorization == nil, clientAssertionHolds(form, key: clientKey) else { return error("invalid_client", status: .unauthorized) }
        } else {
            guard authorization == "Basic " + Data("portcullis:\(secret)".utf8).base64EncodedString() else { return error("invalid_client", status: .unauthorized) }
        }
        switch form["grant_type"] {
        case "authorization_code":
            guard let code = form["code"], let issued = flow.withLock({ $0.codes.removeValue(forKey: code) }) else { return error("invalid_grant") }
            guard issued.clientID == "portcullis", form["redirect_uri"] == issued.redirectURI else { return error("invalid_grant") }
            guard let verifier = form["code_verifier"], Base64URL.encode(try Digest.sha256(Array(verifier.utf8))) == issued.challenge else {
                return error("invalid_grant")
            }
            return try tokens(subject: issued.subject, sid: issued.sid, nonce: issued.nonce)
        case "refresh_token":
            let known = flow.withLock { state -> (subject: String, sid: String)? in
                state.refreshRequests += 1
                guard let token = form["refresh_token"] else { return nil }
                return state.refreshTokens.removeValue(forKey: token)
            }
            guard let known else { return error("invalid_grant") }
            let (deleted, status, subject) = flow.withLock { ($0.deletedSubjects.contains(known.subject), $0.refreshStatus, $0.refreshSubject) }
            if deleted { return Response(status: .badRequest) }
            if let status {
                // The token stays good: an outage is not a refusal.
                flow.withLock { $0.refreshTokens[form["refresh_token"] ?? ""] = known }
                return Response(status: HTTPResponse.Status(code: status))
            }
            return try tokens(subject: subject ?? known.subject, sid: known.sid, nonce: nil)
        case "urn:ietf:params:oauth:grant-type:token-exchange":
            guard form["subject_token_type"] == "urn:ietf:params:oauth:token-type:access_token", let audience = form["audience"] else {
                return error("invalid_request")
            }
            return exchange(subjectToken: form["subject_token"], audience: audience, error: error)
        case "urn:ietf:params:oauth:grant-type:jwt-bearer" where form["requested_token_use"] == "on_behalf_of":
            guard let scope = form["scope"], !scope.isEmpty else { return error("invalid_request") }
            return exchange(subjectToken: form["assertion"], audience: scope, error: error)
        default:
            return error("unsupported_grant_type")
        }
    }

    /// An exchange of one of its live access tokens for one for `audience` (RFC 8693 2.2).
    private func exchange(subjectToken: String?, audience: String, error: (String, HTTPResponse.Status) -> Response) -> Response {
        let now = Date().timeIntervalSince1970
        enum Outcome {
            case refused(Response)
            case exchanged(String, Double)
        }
        let outcome = flow.withLock { state -> Outcome in
            state.exchangeRequests += 1
            if let status = state.exchangeStatus { return .refused(Response(status: HTTPResponse.Status(code: status))) }
            if let refusal = state.exchangeRefusal { return .refused(error(refusal, .badRequest)) }
            guard let subjectToken, let subject = state.accessTokens[subjectToken], subject.expiresAt > now else {
                return .refused(error("invalid_grant", .badRequest))
            }
            let token = "xt-\(subject.subject)-" + UUID().uuidString
            state.exchanged[token] = (subject.subject, audience)
            return .exchanged(token, state.exchangeLifetime)
        }
        switch outcome {
        case .refused(let answer): return answer
        case .exchanged(let token, let lifetime):
            let answer: JSONObject = [
                "access_token": .string(token), "issued_token_type": "urn:ietf:params:oauth:token-type:access_token", "token_type": "Bearer",
                "expires_in": .number(lifetime),
            ]
            return Response(
                status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(.object(answer)))))
        }
    }

    /// RFC 7523's client assertion: this type, signed by the client's key, `iss` = `sub` = the client id,
    /// `aud` the token endpoint, unexpired, with a `jti`.
    private func clientAssertionHolds(_ form: [String: String], key: JWSKey) -> Bool {
        guard form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", form["client_id"] == "portcullis",
            let assertion = form["client_assertion"], let jws = try? JWSCompact.parse(assertion), (try? jws.verifySignature(with: key)) != nil,
            let claims = try? StrictJSONReader().parseObject(jws.payload)
        else { return false }
        let now = Date().timeIntervalSince1970
        return claims["iss"] == "portcullis" && claims["sub"] == "portcullis" && claims["aud"]?.stringValue == issuer + "/protocol/openid-connect/token"
            && (claims["exp"]?.numberValue ?? 0) > now && claims["jti"]?.stringValue != nil
    }

    private func tokens(subject: String, sid: String, nonce: String?) throws -> Response {
        let access = "pat-" + UUID().uuidString
        let (fault, refresh, extra, lifetime) = flow.withLock { state -> (IDTokenFault, String?, JSONObject, Double) in
            let refresh = state.givesRefreshTokens ? "rt-" + UUID().uuidString : nil
            if let refresh { state.refreshTokens[refresh] = (subject, sid) }
            state.accessTokens[access] = (subject, Date().timeIntervalSince1970 + state.accessTokenLifetime)
            return (state.fault, refresh, state.idTokenClaims, state.accessTokenLifetime)
        }
        var claims: JSONObject = extra
        claims["sid"] = .string(sid)
        if let nonce { claims["nonce"] = .string(fault == .wrongNonce ? "another-nonce" : nonce) }
        let key = fault == .badSignature ? try JWSKey.generate(algorithm: .es256, kid: keys.first?.kid ?? "ec-1") : nil
        let idToken = try token(
            sub: subject, aud: fault == .wrongAudience ? "someone-else" : "portcullis", key: key, lifetime: fault == .expired ? -120 : 300, claims: claims)
        var answer: JSONObject = ["access_token": .string(access), "token_type": "Bearer", "expires_in": .number(lifetime), "id_token": .string(idToken)]
        if let refresh { answer["refresh_token"] = .string(refresh) }
        return Response(
            status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(.object(answer)))))
    }

    private static func html(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;").replacingOccurrences(of: "<", with: "&lt;")
    }
}
