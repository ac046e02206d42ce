import JOSE
import RuntimeAPI
import StateSurface

extension ExecutionView {
    init(record: ExecutionRecord, replayed: Bool) {
        self.init(
            executionID: record.id, status: record.status, result: record.result.flatMap { try? StrictJSONReader().parse(Array($0.utf8)) },
            error: record.error.flatMap { try? StrictJSONReader().parse(Array($0.utf8)) }, replayed: replayed)
    }
}

/// Runs intents for sessions and keeps the execution log:
/// accepted -> running -> completed | failed, with idempotency keys.
public struct ExecutionService: Sendable {
    public let sessions: SessionService
    public let executions: any ExecutionRepository
    public let registry: IntentRegistry

    public init(sessions: SessionService, executions: any ExecutionRepository, registry: IntentRegistry = .builtIn) {
        self.sessions = sessions
        self.executions = executions
        self.registry = registry
    }

    /// Executes `intentType` for the session, as `caller`.
    ///
    /// The same idempotency key on the same session returns the first
    /// execution (its result, or its current status if it is still running)
    /// and never runs the handler again.
    public func execute(sessionID: String, intentType: String, payload: JSONValue, idempotencyKey: String?, caller: RuntimeCaller) async throws -> ExecutionView {
        let session = try await sessions.accessible(sessionID, by: caller)
        guard let handler = registry.handler(named: intentType) else {
            throw RuntimeError(.notFound, .intentUnknown, "no intent is named \"\(JSONValue.clip(intentType))\"")
        }
        if session.state == .anonymous, !sessions.configuration.anonymousIntents.contains(intentType) {
            throw RuntimeError(.forbidden, .sessionAnonymous, "an anonymous session may not run \(intentType); log in first")
        }
        if let idempotencyKey, idempotencyKey.isEmpty || idempotencyKey.utf8.count > 200 {
            throw RuntimeError.invalidRequest("idempotency_key must be 1 to 200 bytes")
        }
        let now = sessions.clock.now()
        let record = ExecutionRecord(
            id: "exe_" + (try SecureRandom.identifier(bytes: 16)), sessionID: session.id, intentType: intentType, status: .accepted,
            idempotencyKey: idempotencyKey, payload: String(decoding: JSONWriter.bytes(payload), as: UTF8.self), createdAt: now, updatedAt: now)
        switch try await executions.insertExecution(record) {
        case .existing(let earlier):
            return ExecutionView(record: earlier, replayed: true)
        case .inserted:
            break
        }
        try await executions.updateExecution(id: record.id, status: .running, result: nil, error: nil, now: sessions.clock.now())
        try await sessions.touch(session)
        var finished = record
        do {
            let result = try await handler.run(payload: payload, context: IntentContext(session: session, caller: caller, sessions: sessions, now: now))
            finished.status = .completed
            finished.result = String(decoding: JSONWriter.bytes(result), as: UTF8.self)
        } catch let failure as IntentFailure {
            finished.status = .failed
            finished.error = String(decoding: JSONWriter.bytes(failure.json), as: UTF8.self)
        } catch let error as RuntimeError {
            finished.status = .failed
            finished.error = String(decoding: JSONWriter.bytes(error.json), as: UTF8.self)
        } catch {
            finished.status = .failed
            finished.error = String(decoding: JSONWriter.bytes(["error": "intent_failed", "message": "the intent failed inside the Runtime"]), as: UTF8.self)
        }
        try await executions.updateExecution(id: record.id, status: finished.status, result: finished.result, error: finished.error, now: sessions.clock.now())
        return ExecutionView(record: finished, replayed: false)
    }

    /// An execution, for the owner of its session.
    public func execution(id: String, caller: RuntimeCaller) async throws -> ExecutionView {
        guard let record = try await executions.execution(id: id) else {
            throw RuntimeError(.notFound, .executionNotFound, "no execution has that id")
        }
        _ = try await sessions.accessible(record.sessionID, by: caller)
        return ExecutionView(record: record, replayed: false)
    }
}
