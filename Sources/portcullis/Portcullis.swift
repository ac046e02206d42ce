// portcullis: the command-line tool (the gateway, keys, JWKS, tokens, accounts, the Runtime, benchmark).
import ArgumentParser
import ConfigurationReading
import EdgeHTTP
import DataPlane
import EdgeHTTP
import Gateway
import JOSE
import StateSurface

#if canImport(Glibc)
import Glibc
#endif

@main
struct Portcullis: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "portcullis",
        abstract: "Portcullis: an auth edge gateway. The gateway, keys, tokens, accounts and the Runtime.",
        discussion: """
            Exit codes: 0 success (a token is valid), 1 a token was rejected, \
            2 usage or configuration error.
            """,
        version: BuildInfo.line,
        subcommands: [ServeCommand.self, GatewayCommand.self, ConfigCommand.self, KeysCommand.self, JWKSCommand.self, TokenCommand.self, TrustCommand.self, UsersCommand.self, OAuthCommand.self, ConnectionsCommand.self, RuntimeCommand.self, StorageCommand.self, AuditCommand.self, BenchCommand.self]
    )

    /// Parses and runs, mapping every failure to the documented exit codes:
    /// 1 for a rejected token, 2 for usage and configuration errors.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
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
        } catch let error as StateSurfaceError {
            Terminal.error(error.message)
            Glibc.exit(2)
        } catch let error as GatewayStartupError {
            Terminal.error(error.message)
            Glibc.exit(2)
        } catch let error as ConfigurationError {
            Terminal.error(error.message)
            Glibc.exit(2)
        } catch {
            if exitCode(for: error) == .success {
                exit(withError: error)  // --help, --version
            }
            // ArgumentParser's own "Error: " would follow ours ("portcullis: error: Error: ...").
            var message = fullMessage(for: error)
            if message.hasPrefix("Error: ") { message.removeFirst("Error: ".count) }
            Terminal.error(message)
            Glibc.exit(2)
        }
    }
}
