/// A signed-in caller: the user and tenant an access token named.
public struct Principal: Sendable, Equatable {
    public let userID: String
    public let tenantID: String

    public init(userID: String, tenantID: String) {
        self.userID = userID
        self.tenantID = tenantID
    }
}

/// One session operation the gateway wants the Runtime to perform, described
/// before it is sent: who asks, in which tenant, what, on which session.
public struct SessionIntent: Sendable, Equatable {
    public enum Operation: String, Sendable, CaseIterable {
        case createAnonymous = "session.create_anonymous"
        case createOwned = "session.create"
        case read = "session.read"
        case upgrade = "session.upgrade"
        case revoke = "session.revoke"
        case openSocket = "session.open_socket"
        case runIntent = "session.run_intent"
        case readExecution = "session.read_execution"
    }

    public let operation: Operation
    /// `nil` for an anonymous caller.
    public let principal: Principal?
    public let sessionID: String?
    /// For `runIntent`: the intent type to run.
    public let intentType: String?
    /// For `readExecution`: the execution to read.
    public let executionID: String?

    public init(_ operation: Operation, principal: Principal? = nil, sessionID: String? = nil, intentType: String? = nil, executionID: String? = nil) {
        self.operation = operation
        self.principal = principal
        self.sessionID = sessionID
        self.intentType = intentType
        self.executionID = executionID
    }
}

/// An intent the validator admitted. Only `SessionIntentValidator` makes one,
/// so code that talks to the Runtime can demand proof of admission by type.
///
/// Limits that depend on a count held elsewhere travel with the admission and
/// are enforced where the count lives, in the same step as the change: the
/// Runtime counts the owner's live sessions in the transaction that adds one,
/// the gateway's socket registry counts a session's sockets as it registers one.
public struct AdmittedSessionIntent: Sendable, Equatable {
    public let intent: SessionIntent
    /// For `createOwned` and `upgrade`: how many live sessions the principal may hold, this one included.
    public let maximumLiveSessions: Int?
    /// For `openSocket`: how many sockets the session may have open, this one included.
    public let maximumSockets: Int?

    fileprivate init(_ intent: SessionIntent, maximumLiveSessions: Int? = nil, maximumSockets: Int? = nil) {
        self.intent = intent
        self.maximumLiveSessions = maximumLiveSessions
        self.maximumSockets = maximumSockets
    }
}

/// Why an intent was not admitted.
public struct AdmissionRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The request lacks something it needs (a session id): 400.
        case incomplete
        /// The operation needs a signed-in caller: 401.
        case identityRequired
        /// The contract does not allow it: 403.
        case notAllowed
        /// A contract limit is reached: 429.
        case limitReached
    }

    public let kind: Kind
    /// Stable error code.
    public let code: String
    public let message: String

    public init(_ kind: Kind, _ code: String, _ message: String) {
        self.kind = kind
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

/// Checks every session intent against the execution contract before the
/// gateway sends it to the Runtime: who, which tenant, which operation, within
/// which limits.
public struct SessionIntentValidator: Sendable {
    public let contract: ExecutionContract

    public init(contract: ExecutionContract) {
        self.contract = contract
    }

    /// Admits `intent` or says why not.
    public func admit(_ intent: SessionIntent) throws(AdmissionRefusal) -> AdmittedSessionIntent {
        if let principal = intent.principal, principal.userID.isEmpty || principal.tenantID.isEmpty {
            throw AdmissionRefusal(.identityRequired, "token_invalid", "the access token must name a user (sub) and a tenant (tenant_id)")
        }
        switch intent.operation {
        case .createAnonymous:
            guard intent.sessionID == nil else {
                throw AdmissionRefusal(.incomplete, "invalid_request", "an anonymous session is created by the server; do not send a session_id")
            }
        case .createOwned:
            guard intent.principal != nil else { throw Self.identityRequired }
            guard intent.sessionID == nil else {
                throw AdmissionRefusal(.incomplete, "invalid_request", "a new session is created by the server; do not send a session_id")
            }
            return AdmittedSessionIntent(intent, maximumLiveSessions: contract.maximumSessionsPerUser)
        case .read:
            try Self.requireSession(intent)
        case .upgrade:
            guard intent.principal != nil else { throw Self.identityRequired }
            try Self.requireSession(intent)
            return AdmittedSessionIntent(intent, maximumLiveSessions: contract.maximumSessionsPerUser)
        case .revoke:
            guard intent.principal != nil else { throw Self.identityRequired }
            try Self.requireSession(intent)
        case .openSocket:
            guard intent.principal != nil else { throw Self.identityRequired }
            try Self.requireSession(intent)
            return AdmittedSessionIntent(intent, maximumSockets: contract.maximumSocketsPerSession)
        case .runIntent:
            try Self.requireSession(intent)
            guard let intentType = intent.intentType, !intentType.isEmpty else {
                throw AdmissionRefusal(.incomplete, "invalid_request", "intent_type is required")
            }
            // The anonymous contract for callers without a token; an anonymous session used
            // with a token is held to the same list by the Runtime, which knows the session's state.
            if intent.principal == nil, !contract.anonymousIntents.contains(intentType) {
                throw AdmissionRefusal(
                    .notAllowed, "session_anonymous", "an anonymous session may run only \(contract.anonymousIntents.sorted().joined(separator: ", ")); log in first")
            }
        case .readExecution:
            guard intent.principal != nil else { throw Self.identityRequired }
            guard let executionID = intent.executionID, !executionID.isEmpty else {
                throw AdmissionRefusal(.incomplete, "invalid_request", "an execution id is required")
            }
        }
        return AdmittedSessionIntent(intent)
    }

    /// The refusal for a socket over `contract.maximumSocketsPerSession` (the registry finds it when it counts).
    public func socketLimitReached() -> AdmissionRefusal {
        AdmissionRefusal(
            .limitReached, "rate_limited",
            "the session already has \(contract.maximumSocketsPerSession) open sockets, the most allowed; close one first")
    }

    static let identityRequired = AdmissionRefusal(.identityRequired, "token_missing", "this needs an access token: send Authorization: Bearer <access_token>")

    static func requireSession(_ intent: SessionIntent) throws(AdmissionRefusal) {
        guard let sessionID = intent.sessionID, !sessionID.isEmpty else {
            throw AdmissionRefusal(.incomplete, "session_missing", "a session_id is required")
        }
    }
}
