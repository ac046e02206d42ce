import AsyncHTTPClient
import Foundation
import JOSE
import NIOCore
import NIOHTTP1
import ProviderLogin

/// `portcullis audit --mcp`'s discovery checks: what an MCP client (the official SDKs) needs to
/// find the authorization server from an MCP server's URL, per the MCP authorization spec and
/// RFC 9728. Only the audited URL's own origin is ever requested.
struct MCPDiscoveryAudit {
    /// One check's result, printed beside the attacks.
    struct Finding {
        let name: String
        let passed: Bool
        let status: Int?
        let summary: String
    }

    let url: String
    let timeout: Int

    /// The checks, from the answer the URL gave without a token.
    func check(_ client: HTTPClient, challenge: AuditCommand.Outcome) async -> [Finding] {
        let header = challenge.headers["WWW-Authenticate"].joined(separator: ", ")
        guard challenge.status == 401, let metadataURL = Self.resourceMetadata(in: header) else {
            return [
                Finding(
                    name: "mcp-challenge", passed: false, status: challenge.status,
                    summary: "without a token the answer must be 401 with WWW-Authenticate naming resource_metadata (MCP clients find the authorization server from it)")
            ]
        }
        var findings = [Finding(name: "mcp-challenge", passed: true, status: 401, summary: "401 names resource_metadata \(UsersCommand.shown(JSONValue.clip(metadataURL, to: 200)))")]
        guard let origin = ReturnTarget.origin(of: metadataURL), origin == ReturnTarget.origin(of: url) else {
            findings.append(
                Finding(
                    name: "mcp-resource-metadata", passed: false, status: nil,
                    summary: "resource_metadata is on another origin than the URL audited: audit the server's public URL (the one clients are given)"))
            return findings
        }
        var request = HTTPClientRequest(url: metadataURL)
        request.headers.add(name: "Accept", value: "application/json")
        let document: JSONObject
        let status: Int
        do {
            let response = try await client.execute(request, timeout: .seconds(Int64(timeout)))
            status = Int(response.status.code)
            let bytes = try await response.body.collect(upTo: 1 << 20)
            guard status == 200, let parsed = try? StrictJSONReader().parseObject(Array(bytes.readableBytesView)) else {
                findings.append(Finding(name: "mcp-resource-metadata", passed: false, status: status, summary: "the resource metadata is not a 200 with a JSON object"))
                return findings
            }
            document = parsed
        } catch {
            findings.append(Finding(name: "mcp-resource-metadata", passed: false, status: nil, summary: "the resource metadata could not be fetched (\(type(of: error)))"))
            return findings
        }
        let resource = document["resource"]?.stringValue
        if resource.map(Self.canonical) != Self.canonical(url) {
            findings.append(
                Finding(
                    name: "mcp-resource-metadata", passed: false, status: status,
                    summary: "its resource is \(resource.map { UsersCommand.shown(JSONValue.clip($0, to: 80)) } ?? "missing"), not the URL audited: clients refuse a server whose metadata names another resource (RFC 9728 §3.3)"))
        } else {
            findings.append(Finding(name: "mcp-resource-metadata", passed: true, status: status, summary: "its resource is the URL audited"))
        }
        if case .array(let servers)? = document["authorization_servers"], !servers.isEmpty, servers.allSatisfy({ $0.stringValue?.hasPrefix("https://") == true || $0.stringValue?.hasPrefix("http://") == true }) {
            let names = servers.compactMap(\.stringValue).map { UsersCommand.shown(JSONValue.clip($0, to: 80)) }.joined(separator: ", ")
            findings.append(Finding(name: "mcp-authorization-servers", passed: true, status: status, summary: "authorization servers: \(names)"))
        } else {
            findings.append(
                Finding(name: "mcp-authorization-servers", passed: false, status: status, summary: "authorization_servers is missing or not a list of URLs: clients cannot find where to sign in"))
        }
        return findings
    }

    /// The URL of `resource_metadata` in a `WWW-Authenticate` value (quoted or a token), if any.
    static func resourceMetadata(in header: String) -> String? {
        guard let start = header.range(of: "resource_metadata=", options: .caseInsensitive) else { return nil }
        let rest = header[start.upperBound...]
        if rest.hasPrefix("\"") {
            let value = rest.dropFirst()
            return value.firstIndex(of: "\"").map { String(value[..<$0]) }
        }
        let end = rest.firstIndex { $0 == "," || $0 == " " } ?? rest.endIndex
        return rest[..<end].isEmpty ? nil : String(rest[..<end])
    }

    /// A URL as a resource identifier compares: its scheme and host in lower case, without a
    /// trailing slash, a query or a fragment.
    static func canonical(_ text: String) -> String {
        var text = text
        if let cut = text.firstIndex(where: { $0 == "?" || $0 == "#" }) { text = String(text[..<cut]) }
        while text.hasSuffix("/") { text.removeLast() }
        guard let origin = ReturnTarget.origin(of: text) else { return text }
        return origin.lowercased() + text.dropFirst(origin.count)
    }
}
