// portcullis: the command-line tool (keys, JWKS, tokens, benchmark; the server arrives with the gateway).
import ArgumentParser
import JOSE

#if canImport(Glibc)
import Glibc
#endif

@main
struct Portcullis: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "portcullis",
        abstract: "Portcullis: an auth edge gateway. Manage keys and mint, read and check access tokens.",
        discussion: """
            Exit codes: 0 success (a token is valid), 1 a token was rejected, \
            2 usage or configuration error.
            """,
        subcommands: [KeysCommand.self, JWKSCommand.self, TokenCommand.self, BenchCommand.self]
    )

    /// Parses and runs, mapping every failure to the documented exit codes:
    /// 1 for a rejected token, 2 for usage and configuration errors.
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch let code as ExitCode {
            Glibc.exit(code.rawValue)
        } catch let error as CLIError {
            Terminal.error(error.message)
            Glibc.exit(2)
        } catch let error as KeyError {
            Terminal.error(error.message)
            Glibc.exit(2)
        } catch let error as TokenIssueError {
            Terminal.error(error.message)
            Glibc.exit(2)
        } catch {
            if exitCode(for: error) == .success {
                exit(withError: error)  // --help, --version
            }
            Terminal.error(fullMessage(for: error))
            Glibc.exit(2)
        }
    }
}
