import DataPlane
import Hummingbird
import Synchronization

/// The router's paths and the methods each answers, so that a known path asked with
/// another method gets 405 with `Allow` (RFC 9110 §15.5.6) rather than 404.
///
/// Filled once when the router is built (middleware is added before the routes, so
/// the table is handed over empty and filled after); read only on the 404 path.
final class KnownRoutes: Sendable {
    private struct Route {
        let segments: [Substring]
        var methods: Set<String>
    }

    private let routes = Mutex<[Route]>([])

    /// Takes the router's routes (`Router.routes`): `:name` matches one segment, `*` one, `**` the rest.
    /// A path that answers GET answers HEAD too (the router generates it: `autoGenerateHeadEndpoints`).
    func record(_ descriptions: [(method: String, path: String)]) {
        var table: [String: Route] = [:]
        for (method, path) in descriptions {
            table[path, default: Route(segments: Self.segments(path), methods: [])].methods.insert(method)
            if method == "GET" { table[path]?.methods.insert("HEAD") }
        }
        routes.withLock { $0 = Array(table.values) }
    }

    /// The methods the route for `path` answers; empty when no route has the path.
    ///
    /// As the router's trie does, a literal segment wins over a capture: `/api/session/create`
    /// is the create route (POST), not `/api/session/:id` (GET).
    func methods(for path: String) -> Set<String> {
        let asked = Self.segments(path)
        return routes.withLock { routes in
            let matching = routes.filter { Self.matches($0.segments, asked) }
            guard let best = matching.map({ Self.specificity($0.segments) }).max(by: { $0.lexicographicallyPrecedes($1) }) else { return [] }
            return matching.filter { Self.specificity($0.segments) == best }.reduce(into: Set<String>()) { $0.formUnion($1.methods) }
        }
    }

    /// 1 for each literal segment, 0 for a capture or wildcard, left to right.
    private static func specificity(_ pattern: [Substring]) -> [Int] {
        pattern.map { $0 == "*" || $0 == "**" || $0.hasPrefix(":") || $0.hasPrefix("{") ? 0 : 1 }
    }

    private static func segments(_ path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: true)
    }

    private static func matches(_ pattern: [Substring], _ path: [Substring]) -> Bool {
        for (index, segment) in pattern.enumerated() {
            if segment == "**" { return true }
            guard index < path.count else { return false }
            if segment == "*" || segment.hasPrefix(":") || segment.hasPrefix("{") { continue }
            if segment != path[index] { return false }
        }
        return pattern.count == path.count
    }
}
