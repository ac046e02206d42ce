import ArgumentParser
import ConfigurationReading
import Gateway
import JOSE
import Logging
import ProviderLogin
import TrustedIssuers

/// `portcullis trust`: the identity providers the gateway trusts.
struct TrustCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust",
        abstract: "The identity providers whose tokens the gateway accepts (trust.issuers).",
        subcommands: [TrustCheckCommand.self]
    )
}

/// `portcullis trust check`: fetches every configured issuer's keys now and says what came back.
struct TrustCheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Fetch every trusted issuer's keys now: discovery, keys (kid, alg, age), keys left out, the last error.",
        discussion: """
            For an issuer users sign in through (login), also the redirect URI and back-channel logout URI to register \
            at the provider, and the endpoints its discovery document names. Exit 0 when every issuer's keys (and every \
            login's authorization and token endpoints) could be had, 1 when one's cannot, 2 on a configuration error.
            """
    )

    @Option(help: "Configuration file (YAML). Default: config/portcullis.yaml when it exists.")
    var config: String?

    @Flag(help: "Print JSON: one object per issuer.")
    var json = false

    func run() async throws {
        let values = try await ConfigurationValues.load(path: config)
        let gateway = try GatewayConfiguration(reading: values)
        guard !gateway.trust.issuers.isEmpty else {
            print(json ? "[]" : "no trusted issuers: trust.issuers is empty in \(values.source)")
            return
        }
        let trusted = try TrustedIssuers(configuration: gateway.trust, leeway: gateway.leeway, logger: Logger(label: "portcullis.trust-check"))
        // The client credentials as serve reads them: a file others can read is an error here too.
        let directory = try ProviderDirectory(trust: gateway.trust)
        await trusted.refreshAll()
        let statuses = trusted.statuses
        let logins = Dictionary(uniqueKeysWithValues: directory.providers.map { ($0.issuer, $0.settings) })
        if json {
            print(JSONWriter.string(.array(statuses.map { Self.json($0, login: logins[$0.issuer], gateway: gateway) })))
        } else {
            for status in statuses { print(Self.text(status, login: logins[status.issuer], gateway: gateway)) }
        }
        let loginBroken = statuses.contains { status in
            guard logins[status.issuer] != nil else { return false }
            if case .success? = status.endpoints { return false }
            return true
        }
        if statuses.contains(where: { !$0.usable }) || loginBroken { throw ExitCode(1) }
    }

    /// The lines of a login: what to register at the provider, and what its discovery named.
    static func loginText(_ login: ProviderLoginSettings, _ status: IssuerStatus, gateway: GatewayConfiguration) -> [String] {
        var lines = [
            "  login: \(login.name) (\(login.displayName)), client_id \(login.clientID)",
            "    redirect URI to register: \(gateway.loginRedirectURI)",
            "    back-channel logout URI to register: \(gateway.backChannelLogoutURI)",
        ]
        switch status.endpoints {
        case .success(let endpoints)?:
            lines.append("    authorization endpoint: \(endpoints.authorization)")
            lines.append("    token endpoint: \(endpoints.token)")
            lines.append("    end-session endpoint: \(endpoints.endSession ?? "none (logout ends the gateway's session only)")")
            lines.append("    back-channel logout: \(endpoints.backChannelLogout ? "supported" : "not advertised by the provider")")
        case .failure(let error)?:
            lines.append("    error: \(error.message); users cannot sign in through it")
        case nil:
            lines.append("    error: no discovery document was read; users cannot sign in through it")
        }
        return lines
    }

    static func text(_ status: IssuerStatus, login: ProviderLoginSettings?, gateway: GatewayConfiguration) -> String {
        var lines = [status.issuer, "  keys from: \(status.source)"]
        if status.keys.isEmpty {
            lines.append("  keys: none")
        } else {
            let age = status.age.map { "fetched \(AccessTokenPolicy.describe($0)) ago" } ?? "never fetched"
            lines.append("  keys (\(age)): " + status.keys.map { "\($0.kid) \($0.algorithm)" }.joined(separator: ", "))
        }
        for skipped in status.skipped { lines.append("  left out: \(skipped)") }
        lines.append("  error: \(status.lastError ?? "none")")
        if let login { lines += loginText(login, status, gateway: gateway) }
        return lines.joined(separator: "\n")
    }

    static func json(_ status: IssuerStatus, login: ProviderLoginSettings?, gateway: GatewayConfiguration) -> JSONValue {
        var object: JSONObject = [
            "issuer": .string(status.issuer), "source": .string(status.source), "usable": .bool(status.usable),
            "keys": .array(status.keys.map { ["kid": .string($0.kid), "alg": .string($0.algorithm)] }),
            "age_seconds": status.age.map { .number($0.rounded()) } ?? .null, "skipped": .array(status.skipped.map(JSONValue.string)),
            "error": status.lastError.map(JSONValue.string) ?? .null,
        ]
        if let login {
            var entry: JSONObject = [
                "name": .string(login.name), "display_name": .string(login.displayName), "client_id": .string(login.clientID),
                "redirect_uri": .string(gateway.loginRedirectURI), "backchannel_logout_uri": .string(gateway.backChannelLogoutURI),
            ]
            switch status.endpoints {
            case .success(let endpoints)?:
                entry["authorization_endpoint"] = .string(endpoints.authorization)
                entry["token_endpoint"] = .string(endpoints.token)
                entry["end_session_endpoint"] = endpoints.endSession.map(JSONValue.string) ?? .null
                entry["backchannel_logout_supported"] = .bool(endpoints.backChannelLogout)
                entry["error"] = .null
            case .failure(let error)?: entry["error"] = .string(error.message)
            case nil: entry["error"] = .string("no discovery document was read")
            }
            object["login"] = .object(entry)
        }
        return .object(object)
    }
}
