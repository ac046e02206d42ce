/// What a caller may do and how much of it: the limits the edge enforces
/// before any work reaches the Runtime.
public struct ExecutionContract: Sendable, Equatable {
    /// Live authenticated sessions one user may hold in one tenant.
    public var maximumSessionsPerUser: Int
    /// Open agent WebSockets on one session.
    public var maximumSocketsPerSession: Int
    /// The only intents an anonymous session may run.
    public var anonymousIntents: Set<String>

    public init(maximumSessionsPerUser: Int = 20, maximumSocketsPerSession: Int = 4, anonymousIntents: Set<String> = ["echo", "time.now"]) {
        self.maximumSessionsPerUser = maximumSessionsPerUser
        self.maximumSocketsPerSession = maximumSocketsPerSession
        self.anonymousIntents = anonymousIntents
    }
}
