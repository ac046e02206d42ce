import DataPlane
import EdgeHTTP
import Foundation
import JOSE
import SecurityGuard
import TrafficCop

/// What the guard sees of an upgrade request: the path and query, the headers
/// that carry credentials, and the subprotocols the client offered.
///
/// A browser cannot set headers on a WebSocket, so it may carry its
/// credentials in `Sec-WebSocket-Protocol` (the Kubernetes convention): it
/// offers `portcullis.agent.v1`, `base64url.bearer.<the token, base64url>` and
/// `portcullis.session.<session_id>`; the 101 selects `portcullis.agent.v1`
/// and never echoes a credential. None of these values is ever logged.
public struct UpgradeRequest: Sendable {
    public var path: String
    public var query: [String: String]
    /// Header values by lower-cased name.
    public var headers: [String: String]
    /// The subprotocols offered, in order (every `Sec-WebSocket-Protocol` value, split at commas).
    public var offeredProtocols: [String]

    /// The subprotocol the agent socket speaks; the only one the server selects.
    public static let agentProtocol = "portcullis.agent.v1"
    static let bearerProtocolPrefix = "base64url.bearer."
    static let sessionProtocolPrefix = "portcullis.session."

    /// - Parameter uri: the request target; its path is normalised as every request's is
    ///   (`RequestTarget`). A path that cannot be is kept as it came: it names no route, and
    ///   the request goes on as plain HTTP, where `RequestTargetHandler` refuses it.
    public init(uri: String, headers: [(String, String)]) {
        let (rawPath, rawQuery) = RequestTarget.split(uri[...])
        path = String((try? RequestTarget.normalizedPath(rawPath)) ?? rawPath)
        var query: [String: String] = [:]
        if let rawQuery {
            for pair in rawQuery.split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = String(kv[0]).removingPercentEncoding ?? String(kv[0])
                let value = kv.count == 2 ? (String(kv[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "") : ""
                if query[name] == nil { query[name] = value }
            }
        }
        self.query = query
        var fields: [String: String] = [:]
        var protocols: [String] = []
        for (name, value) in headers {
            let lowered = name.lowercased()
            if lowered == "sec-websocket-protocol" {
                protocols += value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            }
            if fields[lowered] == nil { fields[lowered] = value }
        }
        self.headers = fields
        offeredProtocols = protocols
    }

    /// Whether the client offered `portcullis.agent.v1` (the 101 then selects it).
    public var offersAgentProtocol: Bool { offeredProtocols.contains(Self.agentProtocol) }

    /// The value of the first offered subprotocol that starts with `prefix`.
    private func offered(_ prefix: String) -> String? {
        offeredProtocols.first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    }

    /// The bearer token: the `Authorization` header, else the bearer subprotocol, else `access_token` in the query.
    ///
    /// - Parameter acceptingQuery: `gateway.query_credentials`; when `false`, a URL that carries
    ///   `access_token` is refused whatever else the request carries (a token in a URL ends up in
    ///   proxies' and browsers' logs; RFC 6750 section 5.3).
    /// - Throws: `AuthenticationFailure` for an Authorization header that is not a Bearer credential;
    ///   `GatewayError` 400 for credentials in subprotocols without `portcullis.agent.v1` beside them
    ///   (a browser would refuse the 101 anyway, since the server could select none of them), and
    ///   400 `token_in_url` for a token in the URL that is not accepted.
    func token(acceptingQuery: Bool) throws -> String? {
        if !acceptingQuery, query["access_token"] != nil { throw Self.tokenInURL }
        if let header = try AccessTokenAuthenticator.bearerToken(fromAuthorization: headers["authorization"]) { return header }
        if let encoded = offered(Self.bearerProtocolPrefix) {
            guard offersAgentProtocol else {
                throw GatewayError.invalidRequest("offer the portcullis.agent.v1 subprotocol beside the credentials in Sec-WebSocket-Protocol")
            }
            // An undecodable value is passed on as it is: the verifier refuses it as malformed, without echoing it.
            return Base64URL.decode(encoded).map { String(decoding: $0, as: UTF8.self) } ?? encoded
        }
        return query["access_token"]
    }

    static let tokenInURL = GatewayError(
        .badRequest, "token_in_url",
        "this gateway does not accept access_token in the URL (gateway.query_credentials is false); send it in the Authorization header or the base64url.bearer subprotocol")

    /// The session id: `X-Session-Id`, else the session subprotocol, else `session_id` in the query.
    var sessionID: String? {
        headers["x-session-id"] ?? offered(Self.sessionProtocolPrefix) ?? query["session_id"]
    }
}
