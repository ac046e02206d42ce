/// Where a session is in its life.
public enum SessionState: String, Sendable, CaseIterable {
    /// Created without authentication; owned by nobody yet.
    case anonymous
    /// Owned by one user in one tenant.
    case authenticated
    /// Ended (logout, reuse of a refresh token, a disabled account, or an operator). Never comes back.
    case revoked
}
