import ArgumentParser
import AsyncHTTPClient
import Foundation
import JOSE
import NIOCore
import NIOHTTP1

/// `portcullis audit`: presents a catalogue of forged and altered tokens to
/// one endpoint and reports which ones it accepted.
struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Check that an endpoint refuses forged and altered tokens.",
        discussion: """
            Sends the given token (which the endpoint must accept), then one request per attack \
            (alg none, stripped or altered signatures, key confusion, embedded and remote keys, \
            kid injection, ECDSA zero signatures, crit, b64, duplicate members, typ confusion, \
            oversized tokens, and, with --signing-key, expired, not-yet-valid, wrong-audience and \
            other validly signed copies) as Authorization: Bearer, and prints one line per attack: \
            refused or ACCEPTED, with the status seen. Only the given URL is requested, one request \
            at a time, nothing is followed. Exit 0: every attack refused; 1: at least one accepted; \
            2: usage error, or the endpoint refused the valid token itself.
            """
    )

    @Argument(help: "The endpoint: any URL that takes a Bearer token.")
    var url: String

    @Option(help: "A token the endpoint accepts, or - to read it from stdin (keeps it out of the process list).")
    var token: String

    @Option(help: "The endpoint's public keys as a JWKS file, for key-confusion attacks.")
    var jwks: String?

    @Option(name: .customLong("public-key"), help: "The endpoint's public key as a PEM file, for key-confusion attacks.")
    var publicKey: String?

    @Option(name: .customLong("signing-key"), help: "The private key (PEM) that signed --token, to send validly signed altered copies. Use test keys only.")
    var signingKey: String?

    @Option(help: "HTTP method.")
    var method: String = "GET"

    @Option(help: "Seconds to wait for each answer.")
    var timeout: Int = 5

    @Flag(help: "One JSON object per attack instead of text lines.")
    var json = false

    func run() async throws {
        guard let target = URL(string: url), let scheme = target.scheme, ["http", "https"].contains(scheme), target.host != nil else {
            throw CLIError("the URL must be http:// or https:// with a host, such as http://127.0.0.1:8080/api/session/ses_...")
        }
        let given = try TokenInput.read(token)
        guard !given.isEmpty else { throw CLIError("no token given: pass the token to attack as an argument or on stdin") }
        let header = try Self.header(of: given)
        let algorithm = header["alg"]?.stringValue.flatMap(JWSAlgorithm.init(rawValue:))
        var publicKeys: [JWSKey] = []
        if let jwks {
            guard let data = FileManager.default.contents(atPath: jwks) else { throw CLIError("cannot read the JWKS file \(jwks)") }
            publicKeys = try KeySet.fromJWKS([UInt8](data)).entries.map(\.key)
        }
        if let publicKey {
            guard let pem = try? String(contentsOfFile: publicKey, encoding: .utf8) else { throw CLIError("cannot read the PEM file \(publicKey)") }
            guard let algorithm, algorithm.family != .hmac else { throw CLIError("the token's alg does not name a public-key algorithm to bind --public-key to") }
            publicKeys.append(try JWSKey(pem: pem, algorithm: algorithm, kid: header["kid"]?.stringValue ?? "given"))
        }
        var signer: JWSKey?
        if let signingKey {
            guard let pem = try? String(contentsOfFile: signingKey, encoding: .utf8) else { throw CLIError("cannot read the signing key \(signingKey)") }
            guard let algorithm, algorithm.family != .hmac else { throw CLIError("--signing-key takes a PEM private key for the token's alg") }
            signer = try JWSKey(pem: pem, algorithm: algorithm, kid: header["kid"]?.stringValue ?? "given")
        }
        let catalogue = try TokenAttackCatalogue.attacks(against: given, publicKeys: publicKeys, signingKey: signer, now: Date().timeIntervalSince1970)

        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let baseline = await send(client, token: given)
        var results: [(name: String, summary: String, outcome: Outcome)] = []
        if baseline.accepted {
            results.append(("no-token", "no Authorization header", await send(client, token: nil)))
            for attack in catalogue.attacks {
                results.append((attack.name, attack.summary, await send(client, token: attack.token)))
            }
        }
        try? await client.shutdown()
        guard baseline.accepted else {
            throw CLIError("the endpoint did not accept the given token (\(baseline.label)); give a token it accepts, or the results mean nothing")
        }
        var accepted = 0
        for result in results {
            if result.outcome.accepted { accepted += 1 }
            if json {
                print(JSONWriter.string([
                    "attack": .string(result.name), "result": .string(result.outcome.accepted ? "accepted" : "refused"),
                    "status": result.outcome.status.map { .number(Double($0)) } ?? .null, "summary": .string(result.summary),
                ]))
            } else {
                let verdict = result.outcome.accepted ? "ACCEPTED" : "refused "
                print("\(verdict)  \(result.outcome.label.padding(toLength: 7, withPad: " ", startingAt: 0))  \(result.name.padding(toLength: 26, withPad: " ", startingAt: 0))  \(result.summary)")
            }
        }
        for (name, reason) in catalogue.skipped {
            if json {
                print(JSONWriter.string(["attack": .string(name), "result": "skipped", "reason": .string(reason)]))
            } else {
                print("skipped   -        \(name.padding(toLength: 26, withPad: " ", startingAt: 0))  \(reason)")
            }
        }
        if !json {
            print("\(results.count) attacks: \(results.count - accepted) refused, \(accepted) accepted, \(catalogue.skipped.count) skipped")
        }
        if accepted > 0 { throw ExitCode(1) }
    }

    struct Outcome {
        let status: Int?
        let label: String
        var accepted: Bool { status.map { (200..<300).contains($0) } ?? false }
    }

    func send(_ client: HTTPClient, token: String?) async -> Outcome {
        var request = HTTPClientRequest(url: url)
        request.method = HTTPMethod(rawValue: method.uppercased())
        if let token { request.headers.add(name: "Authorization", value: "Bearer " + token) }
        do {
            let response = try await client.execute(request, timeout: .seconds(Int64(timeout)))
            _ = try? await response.body.collect(upTo: 1 << 20)
            return Outcome(status: Int(response.status.code), label: String(response.status.code))
        } catch {
            return Outcome(status: nil, label: "error")
        }
    }

    static func header(of token: String) throws -> JSONObject {
        guard let first = token.split(separator: ".", omittingEmptySubsequences: false).first, let bytes = Base64URL.decode(String(first)),
            let header = try? StrictJSONReader().parseObject(bytes)
        else { throw CLIError("--token is not a JWS compact token") }
        return header
    }
}
