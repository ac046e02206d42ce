import AsyncHTTPClient
import Foundation
import JOSE
import NIOCore
import NIOHTTP1
import Traces
import TrustedIssuers

/// What a provider's token endpoint answered (RFC 6749 5.1, OpenID Connect Core 3.1.3.3).
public struct TokenEndpointAnswer: Sendable {
    /// The ID token; a refresh may leave it out.
    public let idToken: String?
    /// A refresh token, when the provider gives (or rotates) one.
    public let refreshToken: String?
    /// The access token (RFC 6749 5.1 requires it; a sign-in has no use for it, a connection does).
    public let accessToken: String?
    /// `expires_in`, in seconds, when the server says.
    public let expiresIn: Double?
    /// `scope`, when the server says (RFC 6749 5.1: when it differs from what was asked).
    public let scope: String?
    /// `token_type` (`Bearer`, in any case), when the server says.
    public let tokenType: String?
}

/// Who calls a token endpoint: a client id, its credential, and the CA file its TLS is checked
/// against (`nil`: the system's).
public struct TokenEndpointClient: Sendable {
    public let clientID: String
    public let credential: ClientCredential
    public let caFile: String?

    public init(clientID: String, credential: ClientCredential, caFile: String?) {
        self.clientID = clientID
        self.credential = credential
        self.caFile = caFile
    }
}

extension ProviderDirectory.Provider {
    /// The gateway as this provider's client.
    public var tokenClient: TokenEndpointClient { TokenEndpointClient(clientID: settings.clientID, credential: credential, caFile: trust.caFile) }
}

/// Why a token-endpoint call gave no tokens.
public enum TokenEndpointFailure: Error, Sendable, Equatable {
    /// The provider refused the grant: a 4xx other than 429, with its `error` code (RFC 6749 5.2,
    /// such as `invalid_grant`) or `HTTP <status> without an error code`.
    case refused(String)
    /// The provider could not be reached, answered out of time, too much, with a server error or 429.
    case unavailable(String)
    /// The answer was not a token response.
    case malformed(String)
}

/// Calls a provider's token endpoint as the gateway's OAuth client: the authorization code
/// with its PKCE verifier, a refresh token, or a token exchange (RFC 8693, Entra's on-behalf-of).
///
/// The client authenticates as configured: `client_secret_basic` (RFC 6749 2.3.1, both parts
/// form-encoded) or `private_key_jwt` (OpenID Connect Core 9: a 60-second assertion whose
/// `aud` is the token endpoint). https only (plain http to loopback), no redirects, 10 s and
/// 64 KiB an answer. Each call has an HTTP client of its own, shut down when it ends, as the
/// key fetcher's: sign-ins are seconds apart per user, and nothing is left open at stop.
public struct TokenEndpoint: Sendable {
    static let maximumBytes = 64 << 10
    static let timeout: TimeAmount = .seconds(10)
    public static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    public init() {}

    /// Exchanges an authorization code.
    public func exchange(
        code: String, codeVerifier: String, redirectURI: String, provider: ProviderDirectory.Provider, endpoint: String
    ) async throws(TokenEndpointFailure) -> TokenEndpointAnswer {
        try await exchange(code: code, codeVerifier: codeVerifier, redirectURI: redirectURI, client: provider.tokenClient, endpoint: endpoint)
    }

    /// Exchanges an authorization code as `client`.
    public func exchange(
        code: String, codeVerifier: String, redirectURI: String, client: TokenEndpointClient, endpoint: String
    ) async throws(TokenEndpointFailure) -> TokenEndpointAnswer {
        try await call(
            [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI), ("code_verifier", codeVerifier)],
            client: client, endpoint: endpoint)
    }

    /// Uses a refresh token.
    public func refresh(_ refreshToken: String, provider: ProviderDirectory.Provider, endpoint: String) async throws(TokenEndpointFailure) -> TokenEndpointAnswer {
        try await refresh(refreshToken, client: provider.tokenClient, endpoint: endpoint)
    }

    /// Uses a refresh token as `client`.
    public func refresh(_ refreshToken: String, client: TokenEndpointClient, endpoint: String) async throws(TokenEndpointFailure) -> TokenEndpointAnswer {
        try await call([("grant_type", "refresh_token"), ("refresh_token", refreshToken)], client: client, endpoint: endpoint)
    }

    /// RFC 8693's grant type, and the token type of an access token.
    public static let tokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
    public static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"

    /// Exchanges the person's access token at the provider for one for `audience` (RFC 8693 2.1), as `client`.
    public func tokenExchange(
        subjectToken: String, audience: String, scopes: [String], client: TokenEndpointClient, endpoint: String
    ) async throws(TokenEndpointFailure) -> TokenEndpointAnswer {
        var form = [
            ("grant_type", Self.tokenExchangeGrant), ("subject_token", subjectToken), ("subject_token_type", Self.accessTokenType),
            ("requested_token_type", Self.accessTokenType), ("audience", audience),
        ]
        if !scopes.isEmpty { form.append(("scope", scopes.joined(separator: " "))) }
        return try await call(form, client: client, endpoint: endpoint)
    }

    /// Microsoft Entra's on-behalf-of flow: the person's access token (its `aud` the gateway's
    /// app) as a jwt-bearer `assertion`, for a token with `scopes`, as `client`.
    public func onBehalfOf(assertion: String, scopes: [String], client: TokenEndpointClient, endpoint: String) async throws(TokenEndpointFailure) -> TokenEndpointAnswer {
        try await call(
            [
                ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", assertion), ("requested_token_use", "on_behalf_of"),
                ("scope", scopes.joined(separator: " ")),
            ], client: client, endpoint: endpoint)
    }

    /// Tells a server the gateway is done with `token` (RFC 7009 2.1), as `client`: `hint` is
    /// `access_token` or `refresh_token`. A 200 is done; anything else is the failure it is.
    public func revoke(_ token: String, hint: String, client: TokenEndpointClient, endpoint: String) async throws(TokenEndpointFailure) {
        let (status, body) = try await post([("token", token), ("token_type_hint", hint)], client: client, endpoint: endpoint)
        // RFC 7009 2.2: 200 for a token it did not know too; anything else is read as a token endpoint's failure (it throws).
        if status != .ok { _ = try Self.read(status: status, body: body) }
    }

    private func call(_ form: [(String, String)], client identity: TokenEndpointClient, endpoint: String) async throws(TokenEndpointFailure) -> TokenEndpointAnswer {
        let (status, answer) = try await post(form, client: identity, endpoint: endpoint)
        return try Self.read(status: status, body: answer)
    }

    /// POSTs `form` to `endpoint` as `identity`: the status and the body (at most 64 KiB, within 10 s).
    private func post(_ form: [(String, String)], client identity: TokenEndpointClient, endpoint: String) async throws(TokenEndpointFailure) -> (
        HTTPResponseStatus, [UInt8]
    ) {
        guard TrustedIssuer.isFetchable(endpoint) else {
            throw .unavailable("the token endpoint is not an https URL (plain http only to loopback)")
        }
        var fields = form
        var request = HTTPClientRequest(url: endpoint)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        switch identity.credential {
        case .secret(let secret):
            let pair = FormEncoding.encode(identity.clientID) + ":" + FormEncoding.encode(String(decoding: secret, as: UTF8.self))
            request.headers.add(name: "Authorization", value: "Basic " + Data(pair.utf8).base64EncodedString())
        case .privateKey(let key):
            let assertion: String
            do {
                assertion = try Self.clientAssertion(clientID: identity.clientID, audience: endpoint, key: key)
            } catch {
                throw .unavailable("the client assertion could not be signed")
            }
            fields += [("client_id", identity.clientID), ("client_assertion_type", Self.assertionType), ("client_assertion", assertion)]
        }
        let body = fields.map { FormEncoding.encode($0.0) + "=" + FormEncoding.encode($0.1) }.joined(separator: "&")
        request.body = .bytes(ByteBuffer(string: body))

        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: KeyFetcher.clientConfiguration(caFile: identity.caFile))
        let outcome: Result<(HTTPResponseStatus, ByteBuffer), TokenEndpointFailure> = await CallSpans.http("POST", to: endpoint, peer: "provider") { span in
            do {
                let response = try await client.execute(request, deadline: .now() + Self.timeout)
                CallSpans.answered(span, status: Int(response.status.code))
                return .success((response.status, try await response.body.collect(upTo: Self.maximumBytes)))
            } catch is NIOTooManyBytesError {
                span?.markFailed(because: "too large")
                return .failure(.unavailable("the token endpoint answered more than 64 KiB"))
            } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
                span?.markFailed(because: "timeout")
                return .failure(.unavailable("the token endpoint did not answer within 10 s"))
            } catch {
                span?.markFailed(because: "unreachable")
                return .failure(.unavailable("the token endpoint cannot be reached"))
            }
        }
        try? await client.shutdown()
        let (status, answer) = try outcome.get()
        return (status, Array(answer.readableBytesView))
    }

    /// The token response, or the OAuth error it carries.
    package static func read(status: HTTPResponseStatus, body: [UInt8]) throws(TokenEndpointFailure) -> TokenEndpointAnswer {
        let document = try? StrictJSONReader().parseObject(body)
        guard status == .ok else {
            // RFC 6749 5.2: 400 (or 401 for client authentication) with an `error` code. Any 4xx
            // but 429 is a refusal whatever its body: a provider that answers a deleted user's
            // refresh with 400 and nothing else has said no, and asking again changes nothing.
            if (400..<500).contains(status.code), status.code != 429 {
                if let code = document?["error"]?.stringValue, Self.isErrorCode(code) { throw .refused(code) }
                throw .refused("HTTP \(status.code) without an error code")
            }
            throw status.code >= 500 || status.code == 429 ? .unavailable("the token endpoint answered \(status.code)") : .malformed("the token endpoint answered \(status.code)")
        }
        guard let document else { throw .malformed("the token endpoint's answer is not a JSON object") }
        let idToken = document["id_token"]
        let refreshToken = document["refresh_token"]
        guard idToken == nil || idToken?.stringValue != nil, refreshToken == nil || refreshToken?.stringValue != nil else {
            throw .malformed("the token endpoint's id_token and refresh_token must be strings")
        }
        // A 200 that carries an error and no token is a refusal (GitHub answers a bad code so).
        if let code = document["error"]?.stringValue, document["access_token"] == nil, idToken == nil {
            throw .refused(Self.isErrorCode(code) ? code : "an error without a code")
        }
        // The fields a sign-in never read are read leniently: one that is not what RFC 6749 says is left out.
        var expiresIn: Double?
        switch document["expires_in"] {
        case .number(let seconds)? where seconds > 0 && seconds.isFinite: expiresIn = seconds
        // Some servers write it as a string of digits.
        case .string(let text)? where Double(text).map({ $0 > 0 && $0.isFinite }) == true: expiresIn = Double(text)
        default: break
        }
        return TokenEndpointAnswer(
            idToken: idToken?.stringValue, refreshToken: refreshToken?.stringValue, accessToken: document["access_token"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 },
            expiresIn: expiresIn, scope: document["scope"]?.stringValue, tokenType: document["token_type"]?.stringValue)
    }

    /// An OAuth error code as RFC 6749 allows it (printable ASCII without `"` and `\`), at most 64 bytes:
    /// it is repeated in a redirect and a log, nothing longer or stranger is.
    public static func isErrorCode(_ code: String) -> Bool {
        (1...64).contains(code.utf8.count) && code.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E && $0 != 0x22 && $0 != 0x5C }
    }

    /// A `private_key_jwt` client assertion: `iss` and `sub` the client id, `aud` the token
    /// endpoint, a random `jti`, 60 seconds of life.
    static func clientAssertion(clientID: String, audience: String, key: JWSKey) throws -> String {
        let now = Date().timeIntervalSince1970.rounded(.down)
        let claims: JSONObject = [
            "iss": .string(clientID), "sub": .string(clientID), "aud": .string(audience), "iat": .number(now), "exp": .number(now + 60),
            "jti": .string(try SecureRandom.identifier(bytes: 16)),
        ]
        let header: JSONObject = ["alg": .string(key.algorithm.rawValue), "typ": "JWT", "kid": .string(key.kid)]
        return try JWSCompact.sign(header: header, payload: JSONWriter.bytes(.object(claims)), key: key)
    }
}
