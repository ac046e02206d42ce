import EdgeHTTP
import JOSE
import Logging
import NIOHTTP1
import Synchronization
import SecurityGuard
import TrafficCop

/// What the data plane needs of browser sessions: the cookie's name on this deployment, the
/// sessions met so far, where a navigation is sent to sign in, and the cross-site rules.
package struct BrowserSessionGate: Sendable {
    package let cookie: SessionCookie
    package let book: BrowserSessionBook
    /// `gateway.public_url`, without a trailing `/`: where sign-in starts (its flow cookie must be
    /// set where the provider's callback comes back to).
    package let publicURL: String
    /// `https` or `http`: how browsers reach the gateway (the scheme of the public URL).
    package let scheme: String
    package let clock: any TokenClock
    /// Whether sign-in takes an absolute URL back (its host a route's or the public one, or its origin in
    /// `gateway.login_return_origins`): one it would refuse is never built into a sign-in link.
    package let acceptsReturn: @Sendable (String) -> Bool
    /// Where an origin sign-in will not return to is said, once per origin an hour.
    private let logger: Logger
    /// The origins reported this hour (at most `maximumReportedOrigins`: past it, none more until
    /// the hour ends, so that made-up hosts cannot fill the log, nor silence it for good).
    private let reportedOrigins = ReportedOrigins()
    static let maximumReportedOrigins = 64

    /// A set shared by the copies of this value (a struct cannot hold a `Mutex` itself), and when it was emptied.
    private final class ReportedOrigins: Sendable {
        let state = Mutex<(origins: Set<String>, since: ContinuousClock.Instant)>(([], .now))
    }

    package init(
        cookie: SessionCookie, book: BrowserSessionBook, publicURL: String, clock: any TokenClock, acceptsReturn: @escaping @Sendable (String) -> Bool = { _ in true },
        logger: Logger = Logger(label: "portcullis.browser-sessions")
    ) {
        self.logger = logger
        self.clock = clock
        self.acceptsReturn = acceptsReturn
        self.cookie = cookie
        self.book = book
        self.publicURL = publicURL
        scheme = publicURL.lowercased().hasPrefix("https://") ? "https" : "http"
    }

    /// Whether a request is a browser's navigation (a page load, not an app's own fetch): `GET` or
    /// `HEAD` with `Sec-Fetch-Mode: navigate`, or without `Sec-Fetch-Mode` and with `Accept`
    /// naming `text/html` (a browser too old to send `Sec-Fetch-*`). Only a navigation is ever
    /// answered with a redirect; every other request gets JSON.
    package static func isNavigation(_ head: HTTPRequestHead) -> Bool {
        isNavigation(method: head.method.rawValue, fetchMode: head.headers.first(name: "sec-fetch-mode"), accept: head.headers["accept"])
    }

    /// `isNavigation` from the method's name and the `Sec-Fetch-Mode` and `Accept` values.
    package static func isNavigation(method: String, fetchMode: String?, accept: [String]) -> Bool {
        guard method == "GET" || method == "HEAD" else { return false }
        if let mode = fetchMode { return mode.lowercased() == "navigate" }
        return accept.contains { accept in
            accept.split(separator: ",").contains { range in
                let parts = range.split(separator: ";").map { $0.filter { $0 != " " && $0 != "\t" }.lowercased() }
                guard parts.first == "text/html" else { return false }
                // `q=0` says "not this one".
                let quality = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
                return quality > 0
            }
        }
    }

    /// Whether `method` may change something (RFC 9110 §9.2.1): it must come from the route's own origin when sent with the cookie.
    package static func isUnsafe(_ method: HTTPMethod) -> Bool {
        !(method == .GET || method == .HEAD || method == .OPTIONS)
    }

    /// The refusal of an unsafe request carrying the cookie that does not come from the request's
    /// own origin or one of `allowedOrigins` (`gateway.allowed_origins`): its `Origin` is another,
    /// or it has no `Origin` and its `Sec-Fetch-Site` is not `same-origin` (or is absent too).
    package func crossSiteRefusal(_ head: HTTPRequestHead, host: String?, allowedOrigins: Set<String>) -> GatewayError? {
        crossSiteRefusal(
            origin: head.headers.first(name: "origin"), fetchSite: head.headers.first(name: "sec-fetch-site"), host: host, allowedOrigins: allowedOrigins)
    }

    /// `crossSiteRefusal` from the request's `Origin` and `Sec-Fetch-Site` values.
    package func crossSiteRefusal(origin: String?, fetchSite: String?, host: String?, allowedOrigins: Set<String>) -> GatewayError? {
        if let origin {
            if allowedOrigins.contains(origin) || isOwnOrigin(origin, host: host) { return nil }
        } else if fetchSite?.lowercased() == "same-origin" {
            return nil
        }
        return GatewayError(
            .forbidden, "csrf_refused",
            "a request that changes something and carries the session cookie must come from the app's own origin (Origin, or Sec-Fetch-Site: same-origin) or one in gateway.allowed_origins")
    }

    /// Whether `origin` (as a browser serialises it) is `scheme://host[:port]` of the request's `Host`.
    func isOwnOrigin(_ origin: String, host: String?) -> Bool {
        guard let host else { return false }
        let lowered = host.lowercased()
        let defaultPort = scheme == "https" ? ":443" : ":80"
        let authority = lowered.hasSuffix(defaultPort) ? String(lowered.dropLast(defaultPort.count)) : lowered
        return origin.lowercased() == scheme + "://" + authority
    }

    /// Where a navigation without a session is sent: the public host's sign-in, with the page it
    /// asked for as `rd` (`nil` when its `Host` is no host name: it then gets the 401).
    ///
    /// `rd` is the page in the spelling sign-in accepts (`SignInRedirect`): the host lower-cased
    /// without a trailing dot; without its query, or at the site's root, when the page's address
    /// holds what sign-in refuses (an escaped space or non-ASCII byte, more than 2048 bytes), and
    /// the public host's root (`/`) when sign-in would not return to that host at all, so that no
    /// link leads to a sign-in that cannot return.
    package func signInLocation(host: String?, path: Substring, query: Substring?, provider: String?) -> String? {
        guard var location = location(of: "/.portcullis/sign_in", host: host, path: path, query: query) else { return nil }
        if let provider { location += "&provider=" + Self.percentEncoded(provider) }
        return location
    }

    /// Where a navigation of a person who has not connected `connection` is sent: its connect page
    /// on the public host, with the page it asked for as `rd` (as `signInLocation` spells it).
    package func connectLocation(connection: String, host: String?, path: Substring, query: Substring?) -> String? {
        location(of: "/.portcullis/connect/" + connection, host: host, path: path, query: query)
    }

    /// `{public_url}{page}?rd=...`: the returnable spelling of the page asked for.
    private func location(of page: String, host: String?, path: Substring, query: Substring?) -> String? {
        guard let host, let name = RouteHost.requestHost(host[...]) else { return nil }
        var authority = String(name)
        if let colon = host.lastIndex(of: ":") {
            let port = host[host.index(after: colon)...]
            if !port.isEmpty, port != (scheme == "https" ? "443" : "80") { authority += ":" + port }
        }
        let site = scheme + "://" + authority
        var candidates = [site + path]
        if let query = RequestTarget.queryWithoutCredentials(query) { candidates.insert(site + path + "?" + query, at: 0) }
        // A page sign-in would not send the browser back to (an app host not listed anywhere, say): the public host's root.
        let original = candidates.first { Self.isReturnable($0) && acceptsReturn($0) } ?? (acceptsReturn(site + "/") ? site + "/" : "/")
        if original == "/" { reportUnreturnable(site) }
        return publicURL + page + "?rd=" + Self.percentEncoded(original)
    }

    /// Says, once per origin, that sign-in returns to the public host's `/` instead of a page on
    /// `origin`, and what makes it return there: a person sent elsewhere after signing in, with
    /// nothing said, looks like a gateway that lost their page.
    private func reportUnreturnable(_ origin: String) {
        let first = reportedOrigins.state.withLock { reported in
            if ContinuousClock.now - reported.since > .seconds(3_600) { reported = ([], .now) }
            guard reported.origins.count < Self.maximumReportedOrigins else { return false }
            return reported.origins.insert(origin).inserted
        }
        guard first else { return }
        logger.notice(
            "sign-in will return to / on the public host, not to the page asked for: its origin is not a route's host, the public host, nor in gateway.login_return_origins; add it there (or bind a route to its host) to return to the page",
            metadata: ["origin": "\(JSONValue.clip(origin))"])
    }

    /// Whether sign-in takes `url` back as it is: at most 2048 bytes of visible ASCII without a
    /// backslash, before and after percent-decoding (as `SignInRedirect` checks it).
    static func isReturnable(_ url: String) -> Bool {
        let bytes = Array(url.utf8)
        guard bytes.count <= 2_048 else { return false }
        func plain(_ byte: UInt8) -> Bool { byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "\\") }
        var index = 0
        while index < bytes.count {
            guard plain(bytes[index]) else { return false }
            if bytes[index] == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = PercentEncoding.hexValue(bytes[index + 1]), let low = PercentEncoding.hexValue(bytes[index + 2]),
                    plain(high << 4 | low)
                else { return false }
                index += 3
            } else {
                index += 1
            }
        }
        return true
    }

    /// `text` percent-encoded as a query value (`PercentEncoding.encode`).
    package static func percentEncoded(_ text: String) -> String {
        PercentEncoding.encode(text)
    }
}
