import EdgeHTTP
import JOSE
import NIOCore
import NIOHTTP1
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import TrafficCop

/// `auth: browser` without a Bearer token: the gateway's session cookie, or a sign-in.
extension ProxyExchange {
    /// Reads the session cookie: a live session goes on as its user; none (or an ended one) sends a
    /// navigation to sign in and answers anything else 401 JSON.
    func startWithCookie() {
        let gate = plane.browser
        switch gate.cookie.sessionValue(in: head.headers["cookie"]) {
        case .none:
            return signInNeeded()
        case .several:
            let refusal = GatewayError(
                .badRequest, "session_cookie_ambiguous",
                "the request carries the session cookie \(gate.cookie.name) more than once; clear this site's cookies and sign in again")
            // Never guessed which is ours; a person is told on a page, and both spellings of ours are cleared.
            guard BrowserSessionGate.isNavigation(head) else { return fail(refusal) }
            let page = RefusalPage.html(title: "Sign in again", message: refusal.message)
            return answer(
                status: .badRequest, contentType: "text/html; charset=utf-8", body: ByteBuffer(string: page),
                extra: [
                    ("Cache-Control", "no-store"), ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'"),
                    ("X-Portcullis-Error", refusal.code),
                ] + Self.clearingCookies(gate.cookie))
        case .one(let value):
            let now = gate.clock.now()
            // Memory first, keyed by the value: the common request computes no hash and checks no form.
            switch gate.book.lookup(cookieValue: value, now: now) {
            case .live(let session):
                signedIn(session, cookieValue: value)
            case .ended:
                signInNeeded(clearingCookie: true)
            case .unknown:
                guard BrowserSessionBook.isWellFormed(value) else {
                    // Not one this gateway set: a navigation signs in afresh (a person is never stuck on a stale cookie).
                    if BrowserSessionGate.isNavigation(head) { return signInNeeded(clearingCookie: true) }
                    return fail(Self.cookieRefusal(value, name: gate.cookie.name))
                }
                // A store read per cookie never met here: bounded per client (random cookies cost the store nothing more).
                let load: EventLoopFuture<BrowserSession?>
                do {
                    load = try plane.loadBrowserSession(cookieValue: value, client: clientAddress, now: now, on: eventLoop)
                } catch {
                    return fail(GatewayError(answering: error))
                }
                then(load, call: .browserSessionRead) { exchange, result in
                    switch result {
                    case .success(let session?): exchange.signedIn(session, cookieValue: value)
                    case .success(nil): exchange.signInNeeded(clearingCookie: true)
                    case .failure(let error): exchange.fail(GatewayError(answering: error))
                    }
                }
            }
        }
    }

    /// The refusal of a cookie value that is not the gateway's form, naming the mix-up when it is a credential of another kind.
    static func cookieRefusal(_ value: String, name: String) -> GatewayError {
        if SessionID.isWellFormed(value) {
            return GatewayError(
                .unauthorized, "session_id_as_cookie",
                "\(name) holds a session_id, which is not a credential; the cookie is set by signing in at /.portcullis/sign_in")
        }
        if value.split(separator: ".", omittingEmptySubsequences: false).count == 3 {
            return GatewayError(
                .unauthorized, "token_as_cookie",
                "\(name) holds a JWT; send an access token as Authorization: Bearer, the cookie is set by signing in at /.portcullis/sign_in")
        }
        return GatewayError(.unauthorized, "session_cookie_invalid", "\(name) is not a session cookie this gateway set; sign in again at /.portcullis/sign_in")
    }

    /// A live browser session: the cross-site rule, the route's policy, then the gateway session behind it.
    func signedIn(_ session: BrowserSession, cookieValue: String) {
        guard !finished else { return }
        // A WebSocket carrying the cookie too: another site's page could otherwise open one as the user (cross-site WebSocket hijacking).
        if BrowserSessionGate.isUnsafe(head.method) || webSocket,
            let refusal = plane.browser.crossSiteRefusal(head, host: fields.host, allowedOrigins: route.allowedOrigins)
        {
            return fail(refusal)
        }
        let caller = session.caller
        // Named from here (the cookie's own site sent it): refused by the policy or admitted, the line is theirs.
        nameInAccessLog(caller)
        if let refusal = plane.policyRefusal(route, caller: caller, hasSession: true, requestID: requestID) {
            // Signed in and refused: a page saying so, never a redirect to sign in again (which would loop).
            return failSignedIn(refusal)
        }
        let sessionID = session.record.sessionID
        authenticatedByCookie = true
        switch plane.sessionOwnership(sessionID, of: caller, on: eventLoop) {
        case .known(true):
            proceed(caller, sessionID: sessionID)
        case .known(false):
            sessionEnded(cookieValue)
        case .asking(let read):
            then(read, call: .sessionRead) { exchange, result in
                switch result {
                case .success(true): exchange.proceed(caller, sessionID: sessionID)
                case .success(false): exchange.sessionEnded(cookieValue)
                case .failure(let error as RuntimeRefusal) where error.code == .sessionNotFound || error.code == .sessionForbidden:
                    exchange.sessionEnded(cookieValue)
                case .failure(let error): exchange.fail(GatewayError(answering: error))
                }
            }
        }
    }

    /// The gateway session behind a cookie ended (a logout, the provider's, a disabled account): the cookie is forgotten and the browser signs in again.
    private func sessionEnded(_ cookieValue: String) {
        plane.browser.book.forget(cookieValue: cookieValue)
        signInNeeded(clearingCookie: true)
    }

    /// No session: a navigation goes to sign in (302), anything else is 401 JSON as a request without a token.
    ///
    /// - Parameter clearingCookie: the request's session cookie names no live session (ended, never
    ///   set by this gateway, set under a key or store since replaced): the redirect removes it too,
    ///   in both the `Domain` and the host-only spelling (one planted by another host may be either).
    func signInNeeded(clearingCookie: Bool = false) {
        guard !finished else { return }
        if BrowserSessionGate.isNavigation(head),
            let location = plane.browser.signInLocation(host: fields.host, path: path, query: query, provider: route.signIn)
        {
            var extra = [("Location", location), ("Cache-Control", "no-store")]
            if clearingCookie { extra += Self.clearingCookies(plane.browser.cookie) }
            return answer(status: .found, contentType: nil, body: ByteBuffer(), extra: extra)
        }
        refused(AuthenticationFailure.missing)
    }

    /// `Set-Cookie` fields removing the session cookie in its `Domain` spelling and, under
    /// `cookie_domain`, its host-only one too (a cookie planted by another host may be either).
    static func clearingCookies(_ cookie: SessionCookie) -> [(String, String)] {
        var fields = [("Set-Cookie", cookie.clearing)]
        if cookie.domain != nil { fields.append(("Set-Cookie", cookie.clearing(named: cookie.name))) }
        return fields
    }

    /// A refusal of a signed-in browser: a page for a navigation, JSON for anything else.
    func failSignedIn(_ error: GatewayError) {
        guard BrowserSessionGate.isNavigation(head) else { return fail(error) }
        // The person may be signed in as the wrong account: the sign-out page, back here afterwards
        // (without a credential-looking query parameter, as sign-in's return; the root if too long).
        var back = String(path)
        if let kept = RequestTarget.queryWithoutCredentials(query) { back += "?" + kept }
        if back.utf8.count > 1_024 { back = path.utf8.count > 1_024 ? "/" : String(path) }
        let signOut = "/.portcullis/sign_out?rd=" + BrowserSessionGate.percentEncoded(back)
        let page = RefusalPage.html(title: "Not allowed", message: error.message, signOutLink: signOut)
        answer(status: HTTPResponseStatus(statusCode: error.status.code), contentType: "text/html; charset=utf-8", body: ByteBuffer(string: page),
            extra: [("Cache-Control", "no-store"), ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")])
    }

    /// Answers with a head of the gateway's own and `body`, and ends the exchange (nothing went upstream).
    func answer(status: HTTPResponseStatus, contentType: String?, body: ByteBuffer, extra: [(String, String)]) {
        guard !finished else { return }
        self.status = Int(status.code)
        let closeClient = expectsContinue && !requestEnded
        var headers = HTTPHeaders()
        if let contentType { headers.add(name: "Content-Type", value: contentType) }
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        for (name, value) in extra { headers.add(name: name, value: value) }
        if closeClient { headers.add(name: "Connection", value: "close") }
        decorate(&headers)
        handler.writeToClient(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers)))
        if head.method != .HEAD, body.readableBytes > 0 { handler.writeToClient(.body(.byteBuffer(body))) }
        handler.writeToClient(.end(nil), flush: true)
        finish(closeClient: closeClient || Self.wantsClose(head))
    }
}
