import ArgumentParser
import ConfigurationReading
import Gateway
import JOSE
import Logging
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
        discussion: "Exit 0 when every issuer's keys could be had, 1 when one's cannot, 2 on a configuration error."
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
        await trusted.refreshAll()
        let statuses = trusted.statuses
        if json {
            print(JSONWriter.string(.array(statuses.map(Self.json))))
        } else {
            for status in statuses { print(Self.text(status)) }
        }
        if statuses.contains(where: { !$0.usable }) { throw ExitCode(1) }
    }

    static func text(_ status: IssuerStatus) -> String {
        var lines = [status.issuer, "  keys from: \(status.source)"]
        if status.keys.isEmpty {
            lines.append("  keys: none")
        } else {
            let age = status.age.map { "fetched \(AccessTokenPolicy.describe($0)) ago" } ?? "never fetched"
            lines.append("  keys (\(age)): " + status.keys.map { "\($0.kid) \($0.algorithm)" }.joined(separator: ", "))
        }
        for skipped in status.skipped { lines.append("  left out: \(skipped)") }
        lines.append("  error: \(status.lastError ?? "none")")
        return lines.joined(separator: "\n")
    }

    static func json(_ status: IssuerStatus) -> JSONValue {
        [
            "issuer": .string(status.issuer), "source": .string(status.source), "usable": .bool(status.usable),
            "keys": .array(status.keys.map { ["kid": .string($0.kid), "alg": .string($0.algorithm)] }),
            "age_seconds": status.age.map { .number($0.rounded()) } ?? .null, "skipped": .array(status.skipped.map(JSONValue.string)),
            "error": status.lastError.map(JSONValue.string) ?? .null,
        ]
    }
}
