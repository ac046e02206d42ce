import Foundation
import Hummingbird
import JOSE
import Logging
import Synchronization
import TrustedIssuers

/// An identity provider on loopback for the trusted-issuer tests: OIDC discovery
/// and a JWKS that the test rotates, breaks or slows, with every request counted.
final class FakeProvider: Sendable {
    /// What the JWKS endpoint answers.
    enum Mode: Sendable {
        case normal, down, oversized, malformed, slow
    }

    let server: BackgroundServer
    private let state: Mutex<(keys: [JWSKey], mode: Mode, jwks: Int, discovery: Int)>
    private let codeFlow = Mutex(true)
    private let tokenEndpointOverride = Mutex<String?>(nil)
    /// A token endpoint the discovery document names instead of the issuer's own (another origin, say).
    var tokenEndpointElsewhere: String? {
        get { tokenEndpointOverride.withLock { $0 } }
        set { tokenEndpointOverride.withLock { $0 = newValue } }
    }
    /// The code flow's books: codes and refresh tokens issued, and what the next sign-in does.
    let flow = Mutex(CodeFlow())

    var port: Int { server.port }
    var issuer: String { "http://127.0.0.1:\(port)/realms/acme" }
    var jwksURL: String { "http://127.0.0.1:\(port)/realms/acme/certs" }
    var jwksRequests: Int { state.withLock { $0.jwks } }
    var discoveryRequests: Int { state.withLock { $0.discovery } }
    var keys: [JWSKey] { state.withLock { $0.keys } }

    private init(server: BackgroundServer, keys: [JWSKey]) {
        self.server = server
        self.state = Mutex((keys: keys, mode: .normal, jwks: 0, discovery: 0))
    }

    static func start(keys: [JWSKey]) async throws -> FakeProvider {
        let box = Box()
        let router = Router()
        router.get("/realms/acme/.well-known/openid-configuration") { _, context -> Response in
            guard let provider = box.provider else { return Response(status: .serviceUnavailable) }
            provider.state.withLock { $0.discovery += 1 }
            var document: JSONObject = ["issuer": .string(provider.issuer), "jwks_uri": .string(provider.jwksURL)]
            if provider.publishesCodeFlow {
                // Keycloak's paths; the flow's routes are served as the login issue builds them.
                document["authorization_endpoint"] = .string(provider.issuer + "/protocol/openid-connect/auth")
                document["token_endpoint"] = .string(provider.tokenEndpointElsewhere ?? (provider.issuer + "/protocol/openid-connect/token"))
                document["end_session_endpoint"] = .string(provider.issuer + "/protocol/openid-connect/logout")
                document["backchannel_logout_supported"] = true
                document["authorization_response_iss_parameter_supported"] = true
            }
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(.object(document)))))
        }
        router.get("/realms/acme/certs") { _, _ -> Response in
            guard let provider = box.provider else { return Response(status: .serviceUnavailable) }
            let (keys, mode) = provider.state.withLock { state in
                state.jwks += 1
                return (state.keys, state.mode)
            }
            let body: [UInt8]
            switch mode {
            case .down: return Response(status: .serviceUnavailable)
            case .oversized: body = Array(#"{"keys":[],"pad":""#.utf8) + Array(repeating: UInt8(ascii: "a"), count: 2 << 20) + Array(#""}"#.utf8)
            case .malformed: body = Array(#"{"keys":[{"kty":"RSA""#.utf8)
            case .slow:
                try await Task.sleep(for: .seconds(15))
                body = []
            case .normal:
                body = JSONWriter.bytes(["keys": .array(keys.compactMap { $0.publicJWK().map(JSONValue.object) })])
            }
            return Response(
                status: .ok, headers: [.contentType: "application/json", .cacheControl: "max-age=300"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
        }
        addCodeFlowRoutes(router, box: box)
        let server = try await BackgroundServer.start { onPort in
            Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { await onPort($0.localAddress?.port ?? 0) }, logger: Logger(label: "test.provider"))
        }
        let provider = FakeProvider(server: server, keys: keys)
        box.set(provider)
        return provider
    }

    func publish(_ keys: [JWSKey]) { state.withLock { $0.keys = keys } }
    /// Whether discovery names the code flow's endpoints (authorization, token, end session).
    var publishesCodeFlow: Bool {
        get { codeFlow.withLock { $0 } }
        set { codeFlow.withLock { $0 = newValue } }
    }
    func set(_ mode: Mode) { state.withLock { $0.mode = mode } }
    func stop() async throws { try await server.stop() }

    /// A trusted-issuer entry for this provider: discovery, tenant `acme`, audience `portcullis-api`.
    func trust(staleness: Double = 86_400, cooldown: Double = 30) -> TrustedIssuer {
        var entry = TrustedIssuer(issuer: issuer, keySource: .discovery, audiences: ["portcullis-api"], tenant: .fixed("acme"))
        entry.maximumStaleness = staleness
        entry.refreshCooldown = cooldown
        return entry
    }

    /// A token this provider would issue, signed with `key` (its first key by default).
    func token(
        sub: String = "user-1", aud: JSONValue = "portcullis-api", key: JWSKey? = nil, issuer: String? = nil, lifetime: Double = 300,
        header extra: JSONObject = [:], claims more: JSONObject = [:], withoutJTI: Bool = false
    ) throws -> String {
        let key = try key ?? keys.first.orThrow()
        let now = Date().timeIntervalSince1970.rounded(.down)
        var claims: JSONObject = [
            "iss": .string(issuer ?? self.issuer), "sub": .string(sub), "aud": aud, "iat": .number(now), "exp": .number(now + lifetime),
            "jti": .string(UUID().uuidString),
        ]
        for member in more.members { claims[member.name] = member.value }
        if withoutJTI { claims["jti"] = nil }
        var header: JSONObject = ["alg": .string(key.algorithm.rawValue), "typ": "JWT", "kid": .string(key.kid)]
        for member in extra.members { header[member.name] = member.value }
        return try JWSCompact.sign(header: header, payload: JSONWriter.bytes(.object(claims)), key: key)
    }

    /// Lets the routes find the provider made after them.
    final class Box: Sendable {
        private let value = Mutex<FakeProvider?>(nil)
        var provider: FakeProvider? { value.withLock { $0 } }
        func set(_ provider: FakeProvider) { value.withLock { $0 = provider } }
    }
}

extension Optional {
    func orThrow() throws -> Wrapped {
        guard let value = self else { throw FixtureError("a value was missing") }
        return value
    }
}

/// The system clock moved forward by what the test says (for staleness without waiting).
final class ShiftedClock: TokenClock, Sendable {
    private let offset = Mutex<Double>(0)
    func now() -> Double { SystemClock().now() + offset.withLock { $0 } }
    func advance(by seconds: Double) { offset.withLock { $0 += seconds } }
}
