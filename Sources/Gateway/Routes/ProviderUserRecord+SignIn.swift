import DataPlane
import JOSE
import StateSurface

extension ProviderUserRecord {
    /// The record a provider sign-in leaves: who the provider said signed in, and the names its
    /// ID token gave (`email`, `preferred_username`, `name`: each only when it is text a field
    /// could carry, `IdentityFieldValues.isFieldText`).
    init(userID: String, identity: ProviderIdentityRecord, idTokenClaims claims: JSONObject, at now: Double) {
        func text(_ name: String) -> String? { claims[name]?.stringValue.flatMap { IdentityFieldValues.isFieldText($0) ? $0 : nil } }
        self.init(
            userID: userID, issuer: identity.issuer, subject: identity.subject, tenantID: identity.tenantID, email: text("email"),
            username: text("preferred_username"), name: text("name"), firstSeenAt: now, lastSeenAt: now)
    }
}
