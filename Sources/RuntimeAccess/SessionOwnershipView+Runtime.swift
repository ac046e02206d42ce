import RuntimeAPI
import TrafficCop

extension SessionOwnershipView {
    /// Whether `principal` owns `sessionID`, asked of the Runtime through an admitted read, for a
    /// session the view does not know (`isOwned` answered `nil`); an owned session is remembered.
    ///
    /// - Throws: the Runtime's refusals (an unknown session, say) and the admission's, as they are.
    package func askRuntime(_ sessionID: String, by principal: Principal, runtime: RuntimeClient, admission: Admission) async throws -> Bool {
        let session = try await runtime.session(admission.admit(SessionIntent(.read, principal: principal, sessionID: sessionID)))
        remember(session)
        return session.isOwned(by: principal.userID, tenantID: principal.tenantID)
    }

    /// Whether `principal` owns `sessionID` and it is live: the view's answer, else the Runtime's.
    /// A session the Runtime does not know, or knows as someone else's, is not; a Runtime that
    /// cannot answer throws (an outage, not an ended session).
    package func isLive(_ sessionID: String, by principal: Principal, runtime: RuntimeClient, admission: Admission) async throws -> Bool {
        if let owned = isOwned(sessionID, by: principal.userID, tenantID: principal.tenantID) { return owned }
        do {
            return try await askRuntime(sessionID, by: principal, runtime: runtime, admission: admission)
        } catch let refusal as RuntimeRefusal where refusal.code == .sessionNotFound || refusal.code == .sessionForbidden {
            return false
        }
    }
}
