/// Why no token was exchanged for a person: a stable code, the HTTP status the caller is
/// answered, and one sentence a person can act on.
///
/// Never carries a token: the messages reach the caller and the log.
public struct ExchangeError: Error, Sendable, Equatable {
    /// The stable code (`exchange_...`).
    public let code: String
    public let message: String
    public let status: Int

    init(_ code: String, _ message: String, status: Int) {
        self.code = code
        self.message = message
        self.status = status
    }

    /// The provider said no (a 4xx but 429 from its token endpoint): the person may not have a
    /// token for that upstream. A 403, not a 502: asking again changes nothing.
    public static func refused(_ reason: String) -> ExchangeError {
        ExchangeError(
            "exchange_refused",
            "your identity provider refused a token for this upstream on your behalf (\(reason)); ask its administrator for access to it",
            status: 403)
    }

    /// The provider could not be asked now (unreachable, a 5xx, 429, out of time, an answer without a token).
    public static func unavailable(_ why: String) -> ExchangeError {
        ExchangeError("exchange_unavailable", "your identity provider cannot exchange a token for this upstream now (\(why)); try again shortly", status: 503)
    }

    /// The person has no live sign-in through the provider whose token is exchanged (they signed in
    /// otherwise, or it ended, or its token expired and cannot be renewed: no refresh token, or an
    /// API sign-in, which the gateway does not re-check).
    public static func requiresSignIn(_ issuer: String) -> ExchangeError {
        ExchangeError(
            "exchange_requires_sign_in",
            "this route acts as you with a token from \(issuer), and you have no current sign-in there: sign in to the gateway through it, then try again",
            status: 403)
    }
}
