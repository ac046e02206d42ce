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
            at a time, nothing is followed. With --mcp the requests are MCP's (POST of a JSON-RPC \
            ping, its Accept and Content-Type), and the route's discovery is checked too: the 401 \
            without a token names resource_metadata, and that document (fetched only on the URL's \
            own origin) names this URL as its resource and an authorization server. Exit 0: every \
            attack refused (and, with --mcp, discovery right); 1: at least one accepted, or a \
            discovery problem; 2: usage error, or the endpoint refused the valid token itself.
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

    @Option(help: "HTTP method (default GET; POST with --mcp).")
    var method: String?

    @Option(name: .customLong("header"), help: "A header every request carries, as 'Name: value' (repeat for more).")
    var headers: [String] = []

    @Option(help: "A body every request carries (with --mcp, default a JSON-RPC ping).")
    var body: String?

    @Flag(help: "The URL is an MCP server (Streamable HTTP): send MCP's requests and check its discovery (the 401's resource_metadata and that document).")
    var mcp = false

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
            // Through a file handle: `--jwks <(curl ...)` names a pipe, which FileManager cannot read.
            guard let data = FileHandle(forReadingAtPath: jwks).flatMap({ try? $0.readToEnd() }) else { throw CLIError("cannot read the JWKS file \(jwks)") }
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
        var request = try requestShape()

        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        // An MCP server that keeps sessions answers 400 to a request outside one: open one first
        // with the valid token, and send every request of the audit in it.
        if mcp, request.headers["Mcp-Session-Id"].isEmpty {
            await openMCPSession(client, &request, token: given)
        }
        let baseline = await send(client, request, token: given)
        var results: [(name: String, summary: String, outcome: Outcome)] = []
        var discovery: [MCPDiscoveryAudit.Finding] = []
        if baseline.accepted {
            let anonymous = await send(client, request, token: nil)
            results.append(("no-token", "no Authorization header", anonymous))
            if mcp { discovery = await MCPDiscoveryAudit(url: url, timeout: timeout).check(client, challenge: anonymous) }
            for attack in catalogue.attacks {
                results.append((attack.name, attack.summary, await send(client, request, token: attack.token)))
            }
        }
        try? await client.shutdown()
        guard baseline.accepted else {
            if let status = baseline.status, status != 401, status != 403 {
                throw CLIError(
                    "the endpoint answered \(status) to the given token, which is not a refusal of it: the request itself may be wrong for this endpoint"
                        + (mcp ? " (an MCP server may need --header for its session or protocol version)" : " (try --method, --header, --body, or --mcp for an MCP server)"))
            }
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
        for finding in discovery {
            if json {
                print(JSONWriter.string([
                    "check": .string(finding.name), "result": .string(finding.passed ? "ok" : "problem"),
                    "status": finding.status.map { .number(Double($0)) } ?? .null, "summary": .string(finding.summary),
                ]))
            } else {
                let verdict = finding.passed ? "ok      " : "PROBLEM "
                let status = finding.status.map(String.init) ?? "-"
                print("\(verdict)  \(status.padding(toLength: 7, withPad: " ", startingAt: 0))  \(finding.name.padding(toLength: 26, withPad: " ", startingAt: 0))  \(finding.summary)")
            }
        }
        for (name, reason) in catalogue.skipped {
            if json {
                print(JSONWriter.string(["attack": .string(name), "result": "skipped", "reason": .string(reason)]))
            } else {
                print("skipped   -        \(name.padding(toLength: 26, withPad: " ", startingAt: 0))  \(reason)")
            }
        }
        let problems = discovery.filter { !$0.passed }.count
        if !json {
            print("\(results.count) attacks: \(results.count - accepted) refused, \(accepted) accepted, \(catalogue.skipped.count) skipped")
            if mcp { print("MCP discovery: \(discovery.count - problems) ok, \(problems) problem(s)") }
        }
        if accepted > 0 || problems > 0 { throw ExitCode(1) }
    }

    struct Outcome {
        let status: Int?
        let label: String
        var headers = HTTPHeaders()
        var accepted: Bool { status.map { (200..<300).contains($0) } ?? false }
    }

    /// Streamable HTTP's `initialize` (then `notifications/initialized`) with the valid token: a
    /// server that answers with `Mcp-Session-Id` gets it, and the protocol version asked for, on
    /// every later request. A server that keeps no session answers without one: nothing changes.
    func openMCPSession(_ client: HTTPClient, _ shape: inout RequestShape, token: String) async {
        let version = shape.headers["MCP-Protocol-Version"].first ?? Self.mcpProtocolVersion
        var initialize = shape
        initialize.body =
            #"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"\#(version)","capabilities":{},"clientInfo":{"name":"portcullis-audit","version":"1"}}}"#
        let opened = await send(client, initialize, token: token)
        guard opened.accepted, let session = opened.headers["Mcp-Session-Id"].first, !session.isEmpty else { return }
        shape.headers.replaceOrAdd(name: "Mcp-Session-Id", value: session)
        shape.headers.replaceOrAdd(name: "MCP-Protocol-Version", value: version)
        var initialized = shape
        initialized.body = #"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        _ = await send(client, initialized, token: token)
    }

    /// The revision `--mcp` asks for when opening a session (`--header 'MCP-Protocol-Version: ...'` for another).
    static let mcpProtocolVersion = "2025-11-25"

    /// What every request of the audit is, but its `Authorization`: method, headers and body.
    struct RequestShape {
        var method: HTTPMethod
        var headers: HTTPHeaders
        var body: String?
    }

    /// The request the options describe; with --mcp, Streamable HTTP's POST of a ping unless told otherwise.
    func requestShape() throws -> RequestShape {
        var shape = RequestShape(method: HTTPMethod(rawValue: (method ?? (mcp ? "POST" : "GET")).uppercased()), headers: HTTPHeaders(), body: body)
        if mcp {
            shape.headers.add(name: "Accept", value: "application/json, text/event-stream")
            shape.headers.add(name: "Content-Type", value: "application/json")
            if shape.body == nil { shape.body = #"{"jsonrpc":"2.0","id":1,"method":"ping"}"# }
        }
        for header in headers {
            guard let colon = header.firstIndex(of: ":"), header.startIndex < colon else {
                throw CLIError("--header takes 'Name: value', such as --header 'MCP-Protocol-Version: 2025-11-25'")
            }
            let name = String(header[..<colon]).trimmingCharacters(in: .whitespaces)
            guard name.lowercased() != "authorization" else { throw CLIError("--header cannot set Authorization: the audit sends the tokens itself") }
            shape.headers.replaceOrAdd(name: name, value: String(header[header.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
        }
        return shape
    }

    func send(_ client: HTTPClient, _ shape: RequestShape, token: String?) async -> Outcome {
        var request = HTTPClientRequest(url: url)
        request.method = shape.method
        request.headers = shape.headers
        if let body = shape.body { request.body = .bytes(ByteBuffer(string: body)) }
        if let token { request.headers.add(name: "Authorization", value: "Bearer " + token) }
        do {
            let response = try await client.execute(request, timeout: .seconds(Int64(timeout)))
            _ = try? await response.body.collect(upTo: 1 << 20)
            return Outcome(status: Int(response.status.code), label: String(response.status.code), headers: response.headers)
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
