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
}
