import DataPlane
import EdgeHTTP
import Hummingbird

/// On a route host (one a route is bound to, other than the public host) the gateway serves
/// only `/.portcullis/` and forward-auth: its API stays on the public host, so a path no route serves there
/// is 404, never the gateway's login or session API under an app's name.
struct RouteHostMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let table: LiveRouteTable

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let table = table.current
        guard table.hasHostRoutes, case .unrouted = table.match(host: request.head.authority, path: request.uri.path[...]) else {
            return try await next(request, context)
        }
        throw GatewayError(.notFound, "not_found", "nothing is served at this path on this host; the gateway's own API is on its public host")
    }
}
