/// A user who signed in through a provider (`provider_users`): who they are there, and the names
/// the provider last gave, so that the gateway's id (`ext_...`) can be found and explained.
///
/// Kept from every provider sign-in (the API's and a browser's), never from a Bearer token alone
/// (a provider's token proves a caller on each request; nothing is written per request).
public struct ProviderUserRecord: Sendable, Equatable {
    /// The gateway's id (`ext_...`, from the issuer and the subject).
    public var userID: String
    public var issuer: String
    public var subject: String
    public var tenantID: String
    /// The `email`, `preferred_username` and `name` of the last sign-in's ID token, when it had them.
    public var email: String?
    public var username: String?
    public var name: String?
    public var firstSeenAt: Double
    public var lastSeenAt: Double

    public init(
        userID: String, issuer: String, subject: String, tenantID: String, email: String?, username: String?, name: String?, firstSeenAt: Double,
        lastSeenAt: Double
    ) {
        self.userID = userID
        self.issuer = issuer
        self.subject = subject
        self.tenantID = tenantID
        self.email = email
        self.username = username
        self.name = name
        self.firstSeenAt = firstSeenAt
        self.lastSeenAt = lastSeenAt
    }
}

/// The users seen through providers.
public protocol ProviderUserRepository: Sendable {
    /// Records a sign-in: a new user with `firstSeenAt`, or the names and `lastSeenAt` of a known
    /// one replaced (its `firstSeenAt` kept).
    func recordProviderUser(_ record: ProviderUserRecord) async throws
    /// Every one, the most recently seen first.
    func providerUsers() async throws -> [ProviderUserRecord]
    /// Those whose user id, subject, username, or email (without regard to case) is `text`.
    func providerUsers(matching text: String) async throws -> [ProviderUserRecord]
}
