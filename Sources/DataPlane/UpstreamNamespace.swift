/// Where a route's requests land on its upstream, as a folder of the upstream's namespace, and
/// whether two routes share files under different paths.
///
/// A route maps its prefix folder (`/dav/adm/`) to one folder upstream (`/adm/` on
/// `http://dav:9000`). Two routes on one server whose folders nest are safe when the outer route
/// maps the inner folder to the inner route's own prefix (`/dav` to `/`, `/dav/adm` to `/adm`):
/// the longest prefix then routes `/dav/adm/x` to the inner route, under its policy. Otherwise
/// (`/dav/all` to `/` beside `/dav/adm` to `/adm`) the outer route reaches the inner one's files
/// at another path (`/dav/all/adm/x`), past the inner route's policy.
package enum UpstreamNamespace {
    /// The upstream folder the routes share at different paths, when `a` and `b` are on one
    /// upstream server, one of them speaks WebDAV (a folder of files, acted on whole), and the
    /// outer one reaches the inner one's folder at a path that is not the inner one's prefix on
    /// the same host; `nil` otherwise.
    ///
    /// Plain HTTP routes are not compared: one application behind several prefixes is common, and
    /// its paths are not files that COPY, MOVE or PROPFIND act on.
    package static func sharedFolder(_ a: ProxyRoute, _ b: ProxyRoute) -> String? {
        // Each sends its own host (`preserve_host`, bound to different hosts): two virtual hosts, two namespaces.
        if a.preservesHost, b.preservesHost, a.host != nil, b.host != nil, a.host != b.host { return nil }
        guard Self.speaksWebDAV(a) || Self.speaksWebDAV(b), !a.isForwardAuthOnly, !b.isForwardAuthOnly,
            let originA = UpstreamOrigin(url: a.upstream), let originB = UpstreamOrigin(url: b.upstream), sameServer(originA, originB)
        else { return nil }
        let (folderA, folderB) = (folder(originA, prefix: a.stripsPrefix ? "" : a.pathPrefix), folder(originB, prefix: b.stripsPrefix ? "" : b.pathPrefix))
        let (outer, outerFolder, inner, innerFolder) = folderB.hasPrefix(folderA) ? (a, folderA, b, folderB) : (b, folderB, a, folderA)
        guard innerFolder.hasPrefix(outerFolder) else { return nil }
        // The gateway path the outer route sends to the inner route's folder.
        let reached = asFolder(outer.pathPrefix) + innerFolder.dropFirst(outerFolder.count)
        if reached == asFolder(inner.pathPrefix), outer.host == inner.host { return nil }
        return innerFolder
    }

    /// For each route that reaches an earlier route's upstream folder at another path
    /// (`sharedFolder`), the first such earlier route and the folder, by the later route's index.
    ///
    /// Only routes on one server are compared, and only pairs with a WebDAV route in them: the
    /// cost follows the WebDAV routes on each server, not the square of all routes (10,000 plain
    /// routes on one upstream compare none).
    package static func sharedFolders(in routes: [ProxyRoute]) -> [Int: (earlier: Int, folder: String)] {
        var found: [Int: (earlier: Int, folder: String)] = [:]
        // Per server (`sameServer`'s spelling), the indexes of its routes so far, and of its WebDAV routes.
        var onServer: [String: [Int]] = [:]
        var webDAVOnServer: [String: [Int]] = [:]
        for (index, route) in routes.enumerated() {
            guard !route.isForwardAuthOnly, let origin = UpstreamOrigin(url: route.upstream) else { continue }
            let server = "\(origin.usesTLS ? "https" : "http")://\(origin.host.lowercased()):\(origin.port)"
            let webDAV = speaksWebDAV(route)
            for earlier in (webDAV ? onServer[server] : webDAVOnServer[server]) ?? [] {
                guard let folder = sharedFolder(routes[earlier], route) else { continue }
                found[index] = (earlier, folder)
                break
            }
            onServer[server, default: []].append(index)
            if webDAV { webDAVOnServer[server, default: []].append(index) }
        }
        return found
    }

    /// The methods that make a route WebDAV: they act on a folder's contents or list them, so its
    /// upstream is a WebDAV server, where a `DELETE` of a folder takes all it holds.
    package static let webDAVMethods: Set<String> = ["COPY", "MOVE", "MKCOL", "PROPFIND", "PROPPATCH", "LOCK", "UNLOCK"]

    /// Whether `route` forwards a WebDAV method.
    static func speaksWebDAV(_ route: ProxyRoute) -> Bool {
        route.methods?.contains { webDAVMethods.contains($0.rawValue) } ?? false
    }

    /// The same server, whatever the base path: one namespace of files. Host names compare in any
    /// case; two names for one address (`localhost`, `127.0.0.1`) are not seen as one.
    static func sameServer(_ a: UpstreamOrigin, _ b: UpstreamOrigin) -> Bool {
        a.host.lowercased() == b.host.lowercased() && a.port == b.port && a.usesTLS == b.usesTLS
    }

    /// The folder a route's prefix folder is at upstream: `origin`'s base path, then `prefix` (the
    /// route's, when it does not strip it), its slashes collapsed (`/dav//adm` is `/dav/adm` to most servers).
    static func folder(_ origin: UpstreamOrigin, prefix: String) -> String {
        var path = ""
        for character in origin.basePath + prefix where !(character == "/" && path.hasSuffix("/")) {
            path.append(character)
        }
        return asFolder(path)
    }

    static func asFolder(_ path: String) -> String { path.hasSuffix("/") ? path : path + "/" }
}
