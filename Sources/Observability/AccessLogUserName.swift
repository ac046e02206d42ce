import JOSE

/// `logging.access_user_name`: how an access line names the person beside their `user_id`.
///
/// The id is stable and never personal; a name is what an operator reads. A name comes from the
/// caller's verified claims (the gateway's own account name, or a provider's), never from the request.
public enum AccessLogUserName: String, Sendable, CaseIterable {
    /// `preferred_username` (an account's username, or the provider's), else the email.
    case username
    /// The email, else `preferred_username`.
    case email
    /// No name: only `user_id` (where names must not reach the log).
    case none

    /// The longest name written: a longer one is cut there (a provider's claim is the provider's to make long).
    static let maximumBytes = 128

    /// The name in `claims`, per this choice; `nil` when there is none.
    public func name(in claims: JSONObject) -> String? {
        let username = claims["preferred_username"]?.stringValue
        let email = claims["email"]?.stringValue
        let chosen: String?
        switch self {
        case .username: chosen = username ?? email
        case .email: chosen = email ?? username
        case .none: return nil
        }
        guard let chosen, !chosen.isEmpty else { return nil }
        // Printable whatever handler writes it (swift-log's text handler writes values as they are).
        let cut = chosen.utf8.count <= Self.maximumBytes ? chosen : String(decoding: chosen.utf8.prefix(Self.maximumBytes), as: UTF8.self)
        return LogText.printable(cut)
    }
}
