import DataPlane
import EdgeHTTP
import Hummingbird
import JOSE
import RuntimeAPI
import RuntimeAccess
import TrafficCop

/// The Runtime operations a client calls directly: `POST /api/intent` and
/// `GET /api/runtime/executions/{id}`. Each is a session intent admitted by
/// the Traffic Cop (rate limit per user, contract, ownership in the Runtime)
/// and sent in the typed contract; nothing else of the Runtime's API is public.
struct IntentRoutes: Sendable {
    let authentication: CallerAuthentication
    let admission: Admission
    let runtime: RuntimeClient
    let body: JSONBody

    func register(on router: Router<GatewayRequestContext>) {
        router.post("/api/intent") { request, _ in try await runIntent(request) }
        router.get("/api/runtime/executions/:id") { request, context in try await readExecution(request, context) }
    }

    /// `{session_id, intent_type, payload?, idempotency_key?}` → the execution.
    func runIntent(_ request: Request) async throws -> Response {
        let caller = try await authentication.requireCaller(request)
        try admission.limit(.intentPerUser, key: caller.tenantID + "/" + caller.userID)
        let object = try await body.object(request)
        let sessionID = try GatewayError.checkedSessionID(try object.optionalString("session_id"))
        let intentRequest: IntentRequest
        do {
            intentRequest = try IntentRequest(object)
        } catch {
            throw GatewayError.invalidRequest(error.message)
        }
        let intent = SessionIntent(
            .runIntent, principal: Principal(userID: caller.userID, tenantID: caller.tenantID), sessionID: sessionID,
            intentType: intentRequest.intentType)
        return JSONBody.response(try await runtime.run(admission.admit(intent), request: intentRequest).json)
    }

    func readExecution(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let caller = try await authentication.requireCaller(request)
        try admission.limit(.intentPerUser, key: caller.tenantID + "/" + caller.userID)
        let executionID = try context.parameters.require("id")
        // Only the form the Runtime mints (`exe_` + base64url): the id becomes part of a Runtime path.
        guard executionID.hasPrefix("exe_"), (5...64).contains(executionID.utf8.count),
            executionID.utf8.dropFirst(4).allSatisfy({ Base64URL.isAlphabet($0) })
        else {
            throw GatewayError(.notFound, "execution_not_found", "no execution has that id")
        }
        let intent = SessionIntent(.readExecution, principal: Principal(userID: caller.userID, tenantID: caller.tenantID), executionID: executionID)
        return JSONBody.response(try await runtime.execution(admission.admit(intent)).json)
    }
}
