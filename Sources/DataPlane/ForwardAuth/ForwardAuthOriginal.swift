import EdgeHTTP
import HTTPTypes
import JOSE
import Observability
import TrafficCop

/// The request a proxy in front asks `/api/auth/verify` about, read from its header family's fields.
///
/// Both ways a decision is made read it here: on the event loop (`ForwardAuthExchange`) and on
/// Hummingbird's route (a browser's cookie), so the two can never read a request differently.
package struct ForwardAuthOriginal: Sendable {
    /// The original path, already in `RequestTarget`'s one spelling.
    package let path: Substring
    /// The original query, when there is one.
    package let query: Substring?
    package let method: HTTPRequest.Method

    /// The original request, from `family`'s two fields only; GET when no method is named.
    ///
    /// Refused (400): the other family's fields present (a client may have set them, and a
    /// proxy that copies client headers passes them on), either field given twice, and a URI
    /// not already in the one spelling `RequestTarget` makes: the proxy forwards the URI as it
    /// came, so deciding on a normalised copy (`/a/../b` as `/b`) would decide for a path other
    /// than the one the upstream receives.
    ///
    /// - Parameter values: every value of a field, by name (in any letter case).
    package init(family: ForwardAuthHeaderFamily, values: (HTTPField.Name) -> [String]) throws(GatewayError) {
        let other = family.other
        for name in [other.uriField, other.methodField] where !values(name).isEmpty {
            throw GatewayError(
                .badRequest, "forward_auth_headers_mixed",
                "the request carries \(name.rawName), which this gateway never reads (this proxy's family is \(family.rawValue), gateway.forward_auth: \(family.uriField.rawName) and \(family.methodField.rawName)); have the proxy remove the client's \(name.rawName)")
        }
        let uris = values(family.uriField)
        let methods = values(family.methodField)
        guard uris.count <= 1, methods.count <= 1 else {
            throw GatewayError.invalidRequest("\((uris.count > 1 ? family.uriField : family.methodField).rawName) is given more than once; name one original request")
        }
        guard let uri = uris.first, !uri.isEmpty else {
            throw GatewayError.invalidRequest("name the original request in \(family.uriField.rawName) (this proxy's family is \(family.rawValue), gateway.forward_auth)")
        }
        try self.init(uri: uri, methodName: methods.first ?? "GET")
    }

    /// The original request from its target and method, as forward-auth's proxy and Envoy's
    /// ext_authz name them: refused (400) when the target is not in `RequestTarget`'s one spelling
    /// or carries a token, 405 for a method no route forwards.
    package init(uri: String, methodName name: String) throws(GatewayError) {
        guard let method = ProxyRoute.forwardableMethods.first(where: { $0.rawValue == name }) else {
            throw GatewayError(.methodNotAllowed, "method_not_allowed", "the original method \(JSONValue.clip(name)) is not one a route forwards")
        }
        let (rawPath, query) = RequestTarget.split(uri[...])
        let path: Substring
        do {
            path = try RequestTarget.normalizedPath(rawPath)
            try RequestTarget.checkQuery(query)
        } catch {
            throw GatewayError.invalidRequest(error.message)
        }
        guard path == rawPath else {
            throw GatewayError(
                .badRequest, "original_uri_not_canonical",
                "the original URI's path is not in its one spelling (it would be \(PathRedaction.redactedPath(String(path)))), and the proxy forwards it as it came; refuse or normalise such paths in the proxy")
        }
        // A token in the URI is never read (it would sit in every log on the way); saying so beats ignoring it.
        if let query, RequestTarget.queryWithoutCredentials(query) != query {
            throw GatewayError(.badRequest, "token_in_url", "the original URI carries access_token; send the token in Authorization instead")
        }
        self.path = path
        self.query = query
        self.method = method
    }

    /// The original request's host, from `family`'s host field, given exactly once: with routes
    /// bound to hosts, a decision without it could be another host's route's.
    package static func host(family: ForwardAuthHeaderFamily, values: (HTTPField.Name) -> [String]) throws(GatewayError) -> String {
        let hosts = values(family.hostField)
        guard hosts.count == 1, let host = hosts.first, !host.isEmpty else {
            throw GatewayError.invalidRequest(
                "name the original host in \(family.hostField.rawName), once: routes are bound to hosts (this proxy's family is \(family.rawValue), gateway.forward_auth)")
        }
        return host
    }
}
