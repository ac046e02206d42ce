import JOSE
import RuntimeAPI

/// Verifies assertions on the Runtime side with the JOSE verifier and an assertion policy.
public struct AssertionVerifier: Sendable {
    let verifier: AccessTokenVerifier

    public init(keys: any VerificationKeyProvider, configuration: RuntimeConfiguration, clock: any TokenClock = SystemClock()) {
        let policy = AccessTokenPolicy(
            issuer: configuration.assertionIssuer, audience: configuration.name, leeway: configuration.assertionLeeway,
            maximumLifetime: configuration.assertionMaximumLifetime, acceptedTypes: [AssertionHeader.type],
            requiredClaims: ["iss", "aud", "exp", "iat", "jti"], forbiddenClaims: [])
        verifier = AccessTokenVerifier(keys: keys, policy: policy, clock: clock)
    }

    /// The caller an assertion vouches for.
    ///
    /// - Throws: `RuntimeError` 401 `assertion_missing` or `assertion_invalid` (with the verifier's reason).
    public func caller(fromHeader value: String?) throws -> RuntimeCaller {
        guard let value, !value.isEmpty else {
            throw RuntimeError(.unauthorized, .assertionMissing, "the request has no \(AssertionHeader.name) header; only the gateway may call the Runtime")
        }
        let verified: VerifiedAccessToken
        do {
            verified = try verifier.verify(value)
        } catch {
            throw RuntimeError(.unauthorized, .assertionInvalid, "the gateway assertion was refused (\(error.reason.rawValue)): \(error.message)")
        }
        let userID = verified.claims["sub"]?.stringValue
        let tenantID = verified.claims["tenant_id"]?.stringValue
        guard (userID == nil) == (tenantID == nil), userID?.isEmpty != true, tenantID?.isEmpty != true else {
            throw RuntimeError(.unauthorized, .assertionInvalid, "the gateway assertion must name both sub and tenant_id, or neither")
        }
        let sessionID = verified.claims["session_id"]?.stringValue
        return RuntimeCaller(userID: userID, tenantID: tenantID, sessionID: sessionID)
    }
}
