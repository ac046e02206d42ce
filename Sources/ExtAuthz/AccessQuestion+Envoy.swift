import DataPlane
import EdgeHTTP
import NIOHTTP1

extension AccessQuestion {
    /// The original request an Envoy's check names, in either mode: its target held to its one
    /// spelling (as forward-auth holds `X-Original-URI`), its host, which must be named when routes
    /// are bound to hosts.
    static func envoyCheck(uri: String, method: String, host: String?, headers: HTTPHeaders, hostRequired: Bool, client: String) throws(GatewayError) -> AccessQuestion {
        let original = try ForwardAuthOriginal(uri: uri, methodName: method)
        if hostRequired, host == nil {
            throw GatewayError.invalidRequest("the check names no original host (Host, or attributes.request.http.host): routes are bound to hosts")
        }
        return AccessQuestion(method: original.method, path: original.path, query: original.query, host: host, headers: headers, clientAddress: client, asker: .extAuthz)
    }
}
