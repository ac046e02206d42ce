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
    /// Disabled by the operator (`users disable`): their sign-in through the provider is refused.
    public var disabled: Bool
    /// Tokens issued to them before this are refused (0: none); set by a disable or a delete.
    public var tokensNotBefore: Double

    public init(
        userID: String, issuer: String, subject: String, tenantID: String, email: String?, username: String?, name: String?, firstSeenAt: Double,
        lastSeenAt: Double, disabled: Bool = false, tokensNotBefore: Double = 0
    ) {
        self.disabled = disabled
        self.tokensNotBefore = tokensNotBefore
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
    /// The one with the gateway's id `userID` (`ext_...`).
    func providerUser(id userID: String) async throws -> ProviderUserRecord?
    /// Cuts a provider user off in one transaction, as `disableUser` does an account: disabled
    /// (their sign-in refused), tokens issued before `now` refused, their refresh tokens revoked,
    /// their grants removed with their agents' access tokens, their provider sessions (and the
    /// provider's tokens) forgotten, and the cut-off in the access-change feed. With
    /// `forgetNames`, their email, username and name are cleared too (`users delete`). The record
    /// as it now is; `nil` if there is none.
    func cutOffProviderUser(id userID: String, now: Double, forgetNames: Bool) async throws -> ProviderUserRecord?
    /// Lets a disabled provider user sign in again: tokens issued before `now` stay refused (a
    /// provider's own, issued while they were disabled, too), and the change enters the feed.
    /// `nil` if there is none.
    func enableProviderUser(id userID: String, now: Double) async throws -> ProviderUserRecord?
}
