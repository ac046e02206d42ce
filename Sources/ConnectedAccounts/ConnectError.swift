/// Why connecting an account did not complete: a stable code and one sentence a person can act on.
///
/// Never carries a token, a code or a `state`: the messages reach a page and a log.
public struct ConnectError: Error, Sendable, Equatable {
    /// The stable code (`connect_...`).
    public let code: String
    public let message: String
    /// Whether the person may simply start again (a flow lost or expired), or the service is at fault.
    public let status: Int

    init(_ code: String, _ message: String, status: Int = 400) {
        self.code = code
        self.message = message
        self.status = status
    }

    /// No flow has this `state`: never started, used already, or older than ten minutes.
    static let unknownFlow = ConnectError(
        "connect_flow_unknown", "this connection attempt is unknown, used already or more than ten minutes old; start connecting again")
    /// The callback came to another browser, or the browser is signed in as someone else now.
    static let otherBrowser = ConnectError(
        "connect_browser_mismatch", "this connection was started in another browser or by another person; start connecting again from this browser",
        status: 403)
    /// The person said no at the service (`error=access_denied`), or the service answered with an error.
    static func declined(_ error: String) -> ConnectError {
        ConnectError("connect_declined", "the service did not grant access (\(error)); nothing was connected")
    }
    /// The way back did not name the connection's `issuer` (RFC 9207): it may come from another
    /// service (a mix-up), so its code is never presented; the flow is spent.
    static func issuerMismatch(_ service: String, missing: Bool) -> ConnectError {
        ConnectError(
            "connect_issuer_mismatch",
            "the way back \(missing ? "did not say which service it came from" : "names another service than \(service)") (RFC 9207 iss), so nothing was connected; start connecting again, and if it happens again tell the operator")
    }
    /// The service refused the code at its token endpoint.
    static func refused(_ error: String) -> ConnectError {
        ConnectError("connect_refused", "the service refused the gateway's exchange of the code (\(error)); start connecting again, or ask the operator to check the connection's client", status: 502)
    }
    /// The service could not be reached, or answered out of time or nonsense.
    static func unavailable(_ why: String) -> ConnectError {
        ConnectError("connect_unavailable", "the service cannot be reached to complete the connection (\(why)); try again shortly", status: 503)
    }
}
