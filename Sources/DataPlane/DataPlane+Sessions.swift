import EdgeHTTP
import NIOCore
import RuntimeAccess
import SecurityGuard
import TrafficCop

/// The two session reads every admission on the loop may need (a proxied request, a forward-auth
/// decision): memory first, the store or the Runtime only when memory cannot answer.
extension DataPlane {
    /// Whether a caller owns a session: known now, or being asked.
    enum SessionOwnership {
        case known(Bool)
        /// Not in the local view: the Runtime's answer, through an admitted read, on the loop's future.
        case asking(EventLoopFuture<Bool>)
    }

    /// The refusal `route`'s policy gives `caller` (counted in the metrics), or `nil`: from the
    /// verified token's claims (the cache holds them), before any session read.
    ///
    /// What would have passed (a claim rule's) goes to the log under `requestID`, never to the caller.
    func policyRefusal(_ route: Route, caller: AuthenticatedCaller, hasSession: Bool, requestID: String) -> GatewayError? {
        guard let policy = route.policy,
            let refusal = policy.refusal(claims: caller.claims, tenantID: caller.tenantID, issuer: caller.external?.issuer, hasSession: hasSession)
        else { return nil }
        metrics.policyRefused()
        if let detail = refusal.detail {
            logger.notice("route refused", metadata: ["request_id": "\(requestID)", "route": "\(route.template)", "user_id": "\(caller.userID)", "why": "\(detail)"])
        }
        return GatewayError(refusedBy: refusal)
    }

    /// Whether `caller` owns `sessionID`: the local view's answer, else the Runtime's.
    func sessionOwnership(_ sessionID: String, of caller: AuthenticatedCaller, on eventLoop: any EventLoop) -> SessionOwnership {
        if let owned = sessions.isOwned(sessionID, by: caller.userID, tenantID: caller.tenantID) { return .known(owned) }
        let (runtime, admission, sessions) = (runtime, admission, sessions)
        let principal = Principal(userID: caller.userID, tenantID: caller.tenantID)
        return .asking(eventLoop.makeFutureWithTask { try await sessions.askRuntime(sessionID, by: principal, runtime: runtime, admission: admission) })
    }

    /// The browser session behind a well-formed cookie value memory does not know, read from the
    /// store: at most `rate_limits` `sessionCookieLookupPerClient` a client, so random cookies cost
    /// the store nothing more than the limit.
    ///
    /// - Throws: the limit's refusal (429), before any read.
    func loadBrowserSession(cookieValue: String, client: String, now: Double, on eventLoop: any EventLoop) throws -> EventLoopFuture<BrowserSession?> {
        try admission.limit(.sessionCookieLookupPerClient, key: ClientAddressResolver.rateLimitKey(client))
        let book = browser.book
        return eventLoop.makeFutureWithTask { try await book.load(cookieValue: cookieValue, now: now) }
    }
}
