import SecurityGuard
import Testing

@Suite("The Authorization header: Bearer and its token, read over the bytes")
struct BearerTokenTests {
    @Test(
        "the scheme is Bearer in any case after optional spaces; the token is the rest without trailing spaces and tabs",
        arguments: [
            ("Bearer abc.def.ghi", "abc.def.ghi"), ("bearer abc", "abc"), ("BEARER abc", "abc"), ("BeArEr abc", "abc"),
            ("  Bearer abc", "abc"), ("Bearer abc  \t ", "abc"), ("Bearer   abc", "  abc"), ("Bearer a b", "a b"), ("Bearer  ", ""),
        ])
    func accepted(header: String, token: String) throws {
        #expect(try AccessTokenAuthenticator.bearerToken(fromAuthorization: header) == token)
    }

    @Test(
        "another scheme, no token, no space after the scheme, or a scheme that only starts like Bearer is malformed",
        arguments: ["Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "Bearerabc", "Bearer\tabc", "Bearers abc", "Beare abc", "  ", "Bearér abc"])
    func refused(header: String) {
        #expect(throws: AuthenticationFailure.self) { try AccessTokenAuthenticator.bearerToken(fromAuthorization: header) }
    }

    @Test("no header, or an empty one, is no token (the caller decides whether one is needed)")
    func absent() throws {
        #expect(try AccessTokenAuthenticator.bearerToken(fromAuthorization: nil) == nil)
        #expect(try AccessTokenAuthenticator.bearerToken(fromAuthorization: "") == nil)
    }
}
