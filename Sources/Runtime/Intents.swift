import JOSE
import RuntimeAPI
import StateSurface

/// What an intent handler is given.
public struct IntentContext: Sendable {
    public let session: SessionRecord
    public let caller: RuntimeCaller
    public let sessions: SessionService
    public let now: Double
}

/// Why an intent failed: a stable code and one sentence, stored with the execution.
public struct IntentFailure: Error, Sendable, Equatable {
    public let code: String
    public let message: String

    public init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }

    var json: JSONValue { ["error": .string(code), "message": .string(message)] }
}

/// A named operation the Runtime executes for a session.
public protocol IntentHandler: Sendable {
    func run(payload: JSONValue, context: IntentContext) async throws -> JSONValue
}

/// A handler from a closure.
public struct ClosureIntent: IntentHandler {
    let body: @Sendable (JSONValue, IntentContext) async throws -> JSONValue

    public init(_ body: @escaping @Sendable (JSONValue, IntentContext) async throws -> JSONValue) {
        self.body = body
    }

    public func run(payload: JSONValue, context: IntentContext) async throws -> JSONValue {
        try await body(payload, context)
    }
}

/// The intents the Runtime knows, by name.
public struct IntentRegistry: Sendable {
    private var handlers: [String: any IntentHandler] = [:]

    public init() {}

    public mutating func register(_ name: String, _ handler: any IntentHandler) {
        handlers[name] = handler
    }

    public func handler(named name: String) -> (any IntentHandler)? {
        handlers[name]
    }

    public var names: [String] { handlers.keys.sorted() }

    /// `echo`, `time.now`, `session.describe` and `session.set_metadata`.
    public static var builtIn: IntentRegistry {
        var registry = IntentRegistry()
        registry.register("echo", ClosureIntent { payload, _ in payload })
        registry.register("time.now", ClosureIntent { _, context in
            ["unix": .number(context.now.rounded(.down)), "rfc3339": .string(RFC3339.format(context.now))]
        })
        registry.register("session.describe", ClosureIntent { _, context in context.session.view.json })
        registry.register("session.set_metadata", ClosureIntent { payload, context in
            guard case .object(let patch) = payload else {
                throw IntentFailure("invalid_payload", "session.set_metadata takes a JSON object to merge into the metadata")
            }
            return try await context.sessions.mergeMetadata(context.session.id, patch: patch).view.json
        })
        return registry
    }
}
