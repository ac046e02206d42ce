import DataPlane
import EdgeHTTP
import Hummingbird
import JOSE
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import TrafficCop

/// `/api/session`: create (anonymous or owned), read, upgrade. Every
/// operation is built as a session intent, admitted by the Traffic Cop, and
/// sent to the Runtime with a gateway assertion.
struct SessionRoutes: Sendable {
    let authentication: CallerAuthentication
    let admission: Admission
    let runtime: RuntimeClient
    let body: JSONBody

    func register(on router: Router<GatewayRequestContext>) {
        router.post("/api/session/create-anonymous") { request, context in try await createAnonymous(request, context) }
        router.post("/api/session/create") { request, _ in try await create(request) }
        router.patch("/api/session/:id/upgrade") { request, context in try await upgrade(request, context) }
        router.get("/api/session/:id") { request, context in try await read(request, context) }
    }

    /// Optional `metadata` object from the body; a client-chosen `session_id` is refused.
    func metadataAndCheck(_ body: JSONObject) throws -> JSONObject {
        if body["session_id"] != nil {
            throw GatewayError.invalidRequest("sessions are created by the server; do not send a session_id")
        }
        guard let value = body["metadata"] else { return JSONObject() }
        guard case .object(let metadata) = value else { throw GatewayError.invalidRequest("metadata must be a JSON object; leave it out for none") }
        return metadata
    }

    func createAnonymous(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        try admission.limit(.anonymousSessionPerClient, key: admission.clientKey(request, context))
        let metadata = try metadataAndCheck(try await body.object(request))
        let session = try await runtime.session(admission.admit(SessionIntent(.createAnonymous)), metadata: metadata)
        return JSONBody.response(session.json, status: .created)
    }

    /// A new session owned by the caller, within the contract's sessions per user
    /// (the Runtime counts them in the transaction that adds this one).
    func create(_ request: Request) async throws -> Response {
        let caller = try await authentication.requireCaller(request)
        try admission.limit(.sessionCreatePerUser, key: caller.tenantID + "/" + caller.userID)
        let metadata = try metadataAndCheck(try await body.object(request))
        let intent = SessionIntent(.createOwned, principal: Principal(userID: caller.userID, tenantID: caller.tenantID))
        return JSONBody.response(try await runtime.session(admission.admit(intent), metadata: metadata).json, status: .created)
    }

    func upgrade(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let caller = try await authentication.requireCaller(request)
        let sessionID = try GatewayError.checkedSessionID(context.parameters.get("id"))
        let intent = SessionIntent(.upgrade, principal: Principal(userID: caller.userID, tenantID: caller.tenantID), sessionID: sessionID)
        return JSONBody.response(try await runtime.session(admission.admit(intent)).json)
    }

    /// Anonymous sessions are readable by anybody who holds the id; owned ones
    /// only with the owner's token (401 without one, 403 with another's).
    func read(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let caller = try await authentication.optionalCaller(request)
        let sessionID = try GatewayError.checkedSessionID(context.parameters.get("id"))
        let principal = caller.map { Principal(userID: $0.userID, tenantID: $0.tenantID) }
        do {
            let session = try await runtime.session(admission.admit(SessionIntent(.read, principal: principal, sessionID: sessionID)))
            return JSONBody.response(session.json)
        } catch let refusal as RuntimeRefusal where refusal.code == .sessionForbidden && caller == nil {
            throw GatewayError(.unauthorized, "token_missing", "this session belongs to a user; send their access token as Authorization: Bearer")
        }
    }
}
