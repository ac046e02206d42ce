import ArgumentParser
import ConfigurationReading
import JOSE
import Logging
import TrustedIssuers

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Mint, read and check access tokens.",
        subcommands: [TokenIssueCommand.self, TokenInspectCommand.self, TokenVerifyCommand.self]
    )

    /// Defaults shared by issue and verify, matching the gateway's embedded configuration.
    static let defaultIssuer = "http://127.0.0.1:8080"
    static let defaultAudience = "portcullis"
}

struct TokenIssueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "issue", abstract: "Mint an RFC 9068 access token with the active key.")

    @Option(help: "Subject (the user id).")
    var sub: String

    @Option(help: "Tenant id.")
    var tenant = "default"

    @Option(name: .customLong("client-id"), help: "client_id claim.")
    var clientID = "portcullis-cli"

    @Option(help: "Issuer (iss). Default: the gateway's, as the configuration names it (gateway.issuer, public_url or its listener).")
    var issuer: String?

    @Option(help: "Audience (aud). Default: the configuration's gateway.audience.")
    var audience: String?

    @Option(help: "Configuration file (YAML) the defaults are read from. Default: config/portcullis.yaml when it exists.")
    var config: String?

    @Option(help: "Lifetime: seconds or 90s, 15m, 2h, 1d.")
    var ttl = Duration(argument: "15m")!

    @Option(help: "Scope claim.")
    var scope: String?

    @Option(name: .customLong("claim"), help: "Extra claim NAME=VALUE; VALUE is read as JSON if it parses, else as a string. Repeatable.")
    var claims: [String] = []

    @Option(help: "The keys directory.")
    var keys = "keys"

    @Option(parsing: .unconditional, help: "Sign with this key instead of the active one.")
    var kid: String?

    func run() async throws {
        let values = try await ConfigurationValues.load(path: config)
        let issuer = try self.issuer ?? GatewayIssuer.read(values)?.url ?? TokenCommand.defaultIssuer
        let audience = try self.audience ?? values.string("gateway.audience") ?? TokenCommand.defaultAudience
        var extra = JSONObject()
        for pair in claims {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                throw CLIError("--claim takes NAME=VALUE, not \"\(pair)\"")
            }
            let name = String(pair[..<equals])
            let text = String(pair[pair.index(after: equals)...])
            extra[name] = (try? StrictJSONReader().parse(Array(text.utf8))) ?? .string(text)
        }
        let keySet = try KeySource.load(keysDirectory: keys, jwksFile: nil)
        let signer: any SigningKeyProvider
        if let kid {
            guard let key = keySet.verificationKey(forKID: kid) else { throw CLIError("no key has the kid \(kid) in \(keys)") }
            signer = try KeySet([.init(key: key, status: .active)])
        } else {
            signer = keySet
        }
        if ttl.seconds > 86_400 {
            Terminal.warning("a lifetime over 24 hours is refused by `token verify` and the gateway by default")
        }
        let issued = try AccessTokenIssuer(keys: signer, issuer: issuer, audience: audience, lifetime: ttl.seconds.rounded())
            .issue(subject: sub, tenantID: tenant, clientID: clientID, scope: scope, additionalClaims: extra)
        print(issued.token)
    }
}

struct TokenInspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Decode a token without trusting it: header, claims, times in words, and what a verifier would refuse.",
        discussion: "Exit 0 when the token decodes (warnings or not), 1 when it cannot be decoded, 2 on usage errors."
    )

    @Argument(help: "The token, or - (or nothing) to read it from stdin.")
    var token: String?

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let text = try TokenInput.read(token)
        let now = SystemClock().now()
        let jws: JWSCompact
        do {
            jws = try JWSCompact.parse(text)
        } catch {
            if json {
                print(JSONWriter.pretty(["decoded": false, "reason": .string(error.reason.rawValue), "message": .string(error.message)]))
            } else {
                print("cannot decode: \(error.reason.rawValue): \(error.message)")
            }
            throw ExitCode(1)
        }
        let report = Inspection(jws: jws, now: now)
        if json {
            print(JSONWriter.pretty(report.json))
        } else {
            print(report.text)
        }
    }
}

/// What `token inspect` reports about a decoded token.
struct Inspection {
    let jws: JWSCompact
    let now: Double
    var claims: JSONObject?
    var warnings: [TokenValidationError] = []

    init(jws: JWSCompact, now: Double) {
        self.jws = jws
        self.now = now
        let policy = AccessTokenPolicy()
        do { _ = try jws.algorithm() } catch { warnings.append(error) }
        do { _ = try policy.checkHeader(jws.header) } catch { warnings.append(error) }
        do {
            let claims = try StrictJSONReader().parseObject(jws.payload)
            self.claims = claims
            warnings += policy.problems(in: claims, at: now)
        } catch {
            warnings.append(TokenValidationError(.malformed, "the claims are not a strict JSON object: \(error.message)"))
        }
    }

    var times: [(name: String, at: Double)] {
        ["iat", "nbf", "exp"].compactMap { name in claims?[name]?.numberValue.map { (name, $0) } }
    }

    var json: JSONValue {
        var object: JSONObject = ["decoded": true, "header": .object(jws.header)]
        object["claims"] = claims.map(JSONValue.object) ?? .null
        var timeObject = JSONObject()
        for time in times {
            timeObject[time.name] = ["at": .string(TimeText.iso8601(time.at)), "relative": .string(TimeText.relative(time.name, at: time.at, now: now))]
        }
        object["times"] = .object(timeObject)
        object["signature_bytes"] = .number(Double(jws.signature.count))
        object["warnings"] = .array(warnings.map { ["reason": .string($0.reason.rawValue), "message": .string($0.message)] })
        return .object(object)
    }

    var text: String {
        var lines = ["header:", JSONWriter.pretty(.object(jws.header)), "claims:"]
        lines.append(claims.map { JSONWriter.pretty(.object($0)) } ?? "(not a JSON object)")
        if !times.isEmpty {
            lines.append("times:")
            for time in times {
                lines.append("  \(time.name)  \(TimeText.iso8601(time.at))  (\(TimeText.relative(time.name, at: time.at, now: now)))")
            }
        }
        lines.append("signature: \(jws.signature.count) bytes, not verified (use `portcullis token verify`)")
        if warnings.isEmpty {
            lines.append("warnings: none")
        } else {
            lines.append("warnings (a verifier would refuse this token):")
            lines += warnings.map { "  - \($0.reason.rawValue): \($0.message)" }
        }
        return lines.joined(separator: "\n")
    }
}

struct TokenVerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a token's signature and claims. Exit 0 valid, 1 rejected, 2 usage or configuration error.",
        discussion: """
            The keys come from --keys, --jwks, or an identity provider: --jwks-url URL, or --discovery ISSUER \
            (its /.well-known/openid-configuration names the JWKS). A provider's token is checked as the gateway \
            checks trusted issuers' tokens: typ JWT or at+jwt (or none), kid optional with one key, no session_id rule. \
            Provider URLs must be https (http only to a loopback host); a JWKS that cannot be fetched is exit 2.
            """
    )

    @Argument(help: "The token, or - (or nothing) to read it from stdin.")
    var token: String?

    @Option(help: "A keys directory with keyring.json.")
    var keys: String?

    @Option(help: "A JWKS file; may hold symmetric keys. Each key's alg binds it.")
    var jwks: String?

    @Option(name: .customLong("jwks-url"), help: "An identity provider's JWKS URL (https; http only to loopback).")
    var jwksURL: String?

    @Option(help: "An identity provider's issuer: its keys are found by OIDC discovery, and iss must equal it.")
    var discovery: String?

    @Option(name: .customLong("ca-file"), help: "A PEM CA bundle for the provider's HTTPS instead of the system's roots.")
    var caFile: String?

    @Option(help: "Required issuer (exact). Without it, iss is only checked to be a string.")
    var issuer: String?

    @Option(help: "Audience aud must contain. Without it, aud is only checked for form.")
    var audience: String?

    @Option(help: "Clock skew tolerated, in seconds.")
    var leeway: Double = 60

    @Option(help: "Check as of this Unix time instead of now.")
    var at: Double?

    @Option(name: .customLong("max-lifetime"), help: "Longest accepted remaining lifetime, in seconds.")
    var maxLifetime: Double = 86_400

    @Flag(help: "Print JSON: {\"valid\":true,...} or {\"valid\":false,\"reason\":...}.")
    var json = false

    func validate() throws {
        guard leeway >= 0, leeway.isFinite else { throw ValidationError("--leeway must be a non-negative number of seconds") }
        guard maxLifetime > 0, maxLifetime.isFinite else { throw ValidationError("--max-lifetime must be a positive number of seconds") }
        if let at, !at.isFinite || at < 0 { throw ValidationError("--at must be a Unix time in seconds") }
    }

    func run() async throws {
        let text = try TokenInput.read(token)
        if jwksURL != nil || discovery != nil {
            return try await verifyWithProvider(text)
        }
        let keySet = try KeySource.load(keysDirectory: keys, jwksFile: jwks)
        if !json {
            if issuer == nil { Terminal.note("iss is not checked against an expected issuer (no --issuer)") }
            if audience == nil { Terminal.note("aud is not checked against an expected audience (no --audience)") }
        }
        let policy = AccessTokenPolicy(issuer: issuer, audience: audience, leeway: leeway, maximumLifetime: maxLifetime)
        let clock: any TokenClock = at.map { FixedClock($0) } ?? SystemClock()
        let verifier = AccessTokenVerifier(keys: keySet, policy: policy, clock: clock)
        do {
            printValid(try verifier.verify(text), clock: clock)
        } catch {
            try printRejected(error)
        }
    }

    /// `valid: ...` (or its JSON).
    func printValid(_ verified: VerifiedAccessToken, clock: any TokenClock) {
        if json {
            print(JSONWriter.string(["valid": true, "header": .object(verified.header), "claims": .object(verified.claims)]))
        } else {
            print("valid: sub \(verified.subject), key \(verified.keyID) (\(verified.algorithm.rawValue)), \(TimeText.relative("exp", at: verified.expiresAt, now: clock.now()))")
        }
    }

    /// `rejected: ...` (or its JSON), then exit 1.
    func printRejected(_ error: TokenValidationError) throws -> Never {
        if json {
            print(JSONWriter.string(["valid": false, "reason": .string(error.reason.rawValue), "message": .string(error.message)]))
        } else {
            print("rejected: \(error.reason.rawValue): \(error.message)")
        }
        throw ExitCode(1)
    }
}

extension TokenVerifyCommand {
    /// Checks `text` against a provider's published keys, as the gateway checks a trusted issuer's tokens.
    func verifyWithProvider(_ text: String) async throws {
        guard keys == nil, jwks == nil, jwksURL == nil || discovery == nil else {
            throw CLIError("give one source of keys: --keys, --jwks, --jwks-url or --discovery")
        }
        if let discovery, let issuer, issuer != discovery {
            throw CLIError("--discovery names the issuer; --issuer \(issuer) differs from it")
        }
        let jws: JWSCompact
        do {
            jws = try JWSCompact.parse(text)
        } catch {
            return try report(.refused(error), clock: SystemClock())
        }
        // Without --issuer, the token's own iss selects nothing but itself (and a note says so).
        let claimedIssuer = (try? StrictJSONReader().parseObject(jws.payload))?["iss"]?.stringValue
        guard let expected = discovery ?? issuer ?? claimedIssuer else {
            return try report(.refused(TokenValidationError(.missingClaim, "the token has no iss, and no --issuer was given")), clock: SystemClock())
        }
        if !json {
            if discovery == nil, issuer == nil { Terminal.note("iss is not checked against an expected issuer (no --issuer)") }
            if audience == nil { Terminal.note("aud is not checked against an expected audience (no --audience)") }
        }
        let source: TrustedIssuer.KeySource = jwksURL.map { .jwks(url: $0) } ?? .discovery
        for url in [jwksURL, discovery] {
            if let url, !TrustedIssuer.isFetchable(url) { throw CLIError("\(url) is not an https URL (plain http only to a loopback host)") }
        }
        var entry = TrustedIssuer(issuer: expected, keySource: source, audiences: audience.map { [$0] } ?? [], tenant: .fixed("-"))
        entry.caFile = caFile
        entry.maximumTokenLifetime = maxLifetime
        let clock: any TokenClock = at.map { FixedClock($0) } ?? SystemClock()
        let trusted = try TrustedIssuers(
            configuration: TrustConfiguration(issuers: [entry]), leeway: leeway, clock: clock, logger: Logger(label: "portcullis.token-verify"))
        await trusted.refreshAll()
        if let status = trusted.statuses.first, !status.usable {
            throw CLIError("cannot fetch the keys: \(status.lastError ?? "unknown error")")
        }
        let claims = (try? StrictJSONReader().parseObject(jws.payload)) ?? JSONObject()
        try report(trusted.verify(jws, claims: claims, issuer: expected), clock: clock)
    }

    private func report(_ outcome: ExternalVerification, clock: any TokenClock) throws {
        switch outcome {
        case .verified(_, let verified):
            printValid(verified, clock: clock)
        case .refused(let error):
            try printRejected(error)
        case .keysMayHaveChanged:
            return try report(.refused(TokenValidationError(.unknownKey, "the provider publishes no key with the token's kid")), clock: clock)
        case .unavailable(let why):
            throw CLIError("cannot check the token: \(why)")
        case .tenantNotAllowed(let why):
            return try report(.refused(TokenValidationError(.invalidClaim, why)), clock: clock)
        }
    }
}
