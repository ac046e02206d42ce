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

    /// The record an identity assertion grant leaves: as a sign-in's, but a name the assertion does
    /// not carry (ID-JAGs often carry none) keeps the one `known` had.
    init(userID: String, issuer: String, subject: String, tenantID: String, assertionClaims claims: JSONObject, known: ProviderUserRecord?, at now: Double) {
        func text(_ name: String) -> String? { claims[name]?.stringValue.flatMap { IdentityFieldValues.isFieldText($0) ? $0 : nil } }
        self.init(
            userID: userID, issuer: issuer, subject: subject, tenantID: tenantID, email: text("email") ?? known?.email,
            username: text("preferred_username") ?? known?.username, name: text("name") ?? known?.name, firstSeenAt: now, lastSeenAt: now)
    }
}
