/// The Runtime's stable error codes: the `error` member of its JSON refusals.
public enum RuntimeErrorCode: String, Sendable, CaseIterable {
    /// 401: no `X-Portcullis-Assertion`.
    case assertionMissing = "assertion_missing"
    /// 401: the assertion did not verify.
    case assertionInvalid = "assertion_invalid"
    /// 400: the body or a parameter is wrong.
    case invalidRequest = "invalid_request"
    /// 400: no session id.
    case sessionMissing = "session_missing"
    /// 400: not a session id (or a credential of another kind).
    case sessionMalformed = "session_malformed"
    /// 403: another user's or tenant's session.
    case sessionForbidden = "session_forbidden"
    /// 403: the operation needs an authenticated session or caller.
    case sessionAnonymous = "session_anonymous"
    /// 404: unknown, expired or revoked.
    case sessionNotFound = "session_not_found"
    /// 404: no intent of that name.
    case intentUnknown = "intent_unknown"
    /// 404: no execution of that id.
    case executionNotFound = "execution_not_found"
    /// 409: owned by someone else, or the upgrade race was lost.
    case sessionConflict = "session_conflict"
    /// 409: the session changed too often to update.
    case sessionBusy = "session_busy"
    /// 413: a body or metadata over its limit.
    case payloadTooLarge = "payload_too_large"
    /// 429: the owner already holds the most live sessions the gateway's contract allows.
    case limitReached = "limit_reached"
    /// 503: the store does not answer.
    case unavailable
}
