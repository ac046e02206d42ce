import Foundation
import Testing

/// Security suites feed exact bytes: what `token verify` and `token inspect` are given
/// is the token, not something to tidy up first.
@Suite("token verify and inspect take the token's exact bytes")
struct TokenInputTests {
    /// A valid token from a fresh key directory.
    static func issued(_ cli: CLI) throws -> String {
        _ = try cli.run(["keys", "generate", "--alg", "ES256", "--dir", "keys"])
        let issued = try cli.run(["token", "issue", "--sub", "alice", "--tenant", "acme", "--keys", "keys"])
        #expect(issued.status == 0)
        return String(issued.stdout.dropLast())  // print adds one newline
    }

    static let verify = ["token", "verify", "--keys", "keys", "--json"]

    static func reason(_ result: CLI.Result) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])?["reason"] as? String
    }

    @Test("an argument with a leading or trailing space, tab or newline is rejected as malformed (exit 1), never trimmed")
    func argumentNotTrimmed() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let token = try Self.issued(cli)
        #expect(try cli.run(["token", "verify", token, "--keys", "keys", "--json"]).status == 0)
        for variant in [" " + token, token + " ", "\t" + token, token + "\n"] {
            let result = try cli.run(["token", "verify", variant, "--keys", "keys", "--json"])
            #expect(result.status == 1 && Self.reason(result) == "malformed", "exit \(result.status)")
        }
    }

    @Test("an empty token is rejected as malformed (exit 1), as an argument and on stdin, not as a usage error")
    func emptyIsMalformed() throws {
        let cli = try CLI()
        defer { cli.remove() }
        _ = try Self.issued(cli)
        let argument = try cli.run(["token", "verify", "", "--keys", "keys", "--json"])
        #expect(argument.status == 1 && Self.reason(argument) == "malformed", "exit \(argument.status): \(argument.stderr)")
        let stdin = try cli.run(Self.verify, stdin: "")
        #expect(stdin.status == 1 && Self.reason(stdin) == "malformed", "exit \(stdin.status): \(stdin.stderr)")
    }

    @Test("stdin may end in one newline or CRLF; a second newline or a leading space makes the token malformed")
    func stdinDropsOneNewline() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let token = try Self.issued(cli)
        for accepted in [token, token + "\n", token + "\r\n"] {
            #expect(try cli.run(Self.verify, stdin: accepted).status == 0)
        }
        for refused in [token + "\n\n", " " + token + "\n", token + " \n"] {
            let result = try cli.run(Self.verify, stdin: refused)
            #expect(result.status == 1 && Self.reason(result) == "malformed", "exit \(result.status)")
        }
    }

    @Test("token inspect reads the same way: a leading space cannot be decoded (exit 1); stdin with one newline can")
    func inspect() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let token = try Self.issued(cli)
        #expect(try cli.run(["token", "inspect", " " + token]).status == 1)
        #expect(try cli.run(["token", "inspect", ""]).status == 1)
        #expect(try cli.run(["token", "inspect"], stdin: token + "\n").status == 0)
    }
}
