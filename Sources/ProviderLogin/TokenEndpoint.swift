import AsyncHTTPClient
import Foundation
import JOSE
import NIOCore
import NIOHTTP1
import TrustedIssuers

/// What a provider's token endpoint answered (RFC 6749 5.1, OpenID Connect Core 3.1.3.3).
public struct TokenEndpointAnswer: Sendable {
    /// The ID token; a refresh may leave it out.
    public let idToken: String?
    /// A refresh token, when the provider gives (or rotates) one.
    public let refreshToken: String?
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
/// with its PKCE verifier, or a refresh token.
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
        try await call(
            [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI), ("code_verifier", codeVerifier)],
            provider: provider, endpoint: endpoint)
    }

    /// Uses a refresh token.
    public func refresh(_ refreshToken: String, provider: ProviderDirectory.Provider, endpoint: String) async throws(TokenEndpointFailure) -> TokenEndpointAnswer {
        try await call([("grant_type", "refresh_token"), ("refresh_token", refreshToken)], provider: provider, endpoint: endpoint)
    }

    private func call(_ form: [(String, String)], provider: ProviderDirectory.Provider, endpoint: String) async throws(TokenEndpointFailure) -> TokenEndpointAnswer {
        guard TrustedIssuer.isFetchable(endpoint) else {
            throw .unavailable("the token endpoint is not an https URL (plain http only to loopback)")
        }
        var fields = form
        var request = HTTPClientRequest(url: endpoint)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        switch provider.credential {
        case .secret(let secret):
            let pair = FormEncoding.encode(provider.settings.clientID) + ":" + FormEncoding.encode(String(decoding: secret, as: UTF8.self))
            request.headers.add(name: "Authorization", value: "Basic " + Data(pair.utf8).base64EncodedString())
        case .privateKey(let key):
            let assertion: String
            do {
                assertion = try Self.clientAssertion(clientID: provider.settings.clientID, audience: endpoint, key: key)
            } catch {
                throw .unavailable("the client assertion could not be signed")
            }
            fields += [("client_id", provider.settings.clientID), ("client_assertion_type", Self.assertionType), ("client_assertion", assertion)]
        }
        let body = fields.map { FormEncoding.encode($0.0) + "=" + FormEncoding.encode($0.1) }.joined(separator: "&")
        request.body = .bytes(ByteBuffer(string: body))

        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: KeyFetcher.clientConfiguration(caFile: provider.trust.caFile))
        let outcome: Result<(HTTPResponseStatus, ByteBuffer), TokenEndpointFailure>
        do {
            let response = try await client.execute(request, deadline: .now() + Self.timeout)
            outcome = .success((response.status, try await response.body.collect(upTo: Self.maximumBytes)))
        } catch is NIOTooManyBytesError {
            outcome = .failure(.unavailable("the token endpoint answered more than 64 KiB"))
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            outcome = .failure(.unavailable("the token endpoint did not answer within 10 s"))
        } catch {
            outcome = .failure(.unavailable("the token endpoint cannot be reached"))
        }
        try? await client.shutdown()
        let (status, answer) = try outcome.get()
        return try Self.read(status: status, body: Array(answer.readableBytesView))
    }

    /// The token response, or the OAuth error it carries.
    static func read(status: HTTPResponseStatus, body: [UInt8]) throws(TokenEndpointFailure) -> TokenEndpointAnswer {
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
        return TokenEndpointAnswer(idToken: idToken?.stringValue, refreshToken: refreshToken?.stringValue)
    }

    /// An OAuth error code as RFC 6749 allows it (printable ASCII without `"` and `\`), at most 64 bytes:
    /// it is repeated in a redirect and a log, nothing longer or stranger is.
    static func isErrorCode(_ code: String) -> Bool {
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
