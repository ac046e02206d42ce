import ConfigurationReading
import Foundation
import Gateway
import JOSE

/// What a running `serve` started with, as fingerprints, in `keys/running-configuration.json`
/// (mode 0600): `config check` compares a file with it and says what a reload would not put in
/// force (a key that waits for a restart) or would refuse (a sign-in provider changed).
///
/// Only SHA-256 fingerprints of the values are kept, never the values (a storage URL may hold a
/// password). The file names the process; once that process is gone the file says nothing.
struct RunningConfiguration: Codable, Equatable {
    let pid: Int32
    /// Each configuration key read at start, and its value's fingerprint.
    let keys: [String: String]
    /// The sign-in providers' settings' fingerprint.
    let signIns: String

    static let fileName = "running-configuration.json"

    init(pid: Int32, values: ConfigurationValues, gateway: GatewayConfiguration) throws {
        self.pid = pid
        keys = try values.readValues.mapValues(Digest.sha256Base64URL)
        signIns = try Digest.sha256Base64URL(GatewayServices.signInText(gateway.trust))
    }

    /// Writes it into `directory`, replacing an earlier one (a start's; a failure to write is not the start's failure).
    func write(into directory: String) throws {
        let path = directory + "/" + Self.fileName
        let data = try JSONEncoder().encode(self)
        let temporary = path + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw CLIError("cannot write \(temporary)")
        }
        guard rename(temporary, path) == 0 else { throw CLIError("cannot replace \(path)") }
    }

    /// The running process's, from `directory`: `nil` when there is none, it cannot be read, or its process is gone.
    static func read(from directory: String) -> RunningConfiguration? {
        guard let data = FileManager.default.contents(atPath: directory + "/" + fileName),
            let running = try? JSONDecoder().decode(RunningConfiguration.self, from: data), running.pid > 0,
            kill(running.pid, 0) == 0 || errno == EPERM
        else { return nil }
        return running
    }

    /// What a reload of `next` would do to the process that wrote this: the keys whose new value
    /// waits for a restart, and whether it would be refused for a sign-in provider's change.
    func reload(of next: RunningConfiguration) -> (restartKeys: [String], refusedForSignIns: Bool) {
        let changed = Set(keys.keys).union(next.keys.keys).filter { keys[$0] != next.keys[$0] }
        return (changed.filter { !GatewayServices.isLive($0) }.sorted(), signIns != next.signIns)
    }
}
