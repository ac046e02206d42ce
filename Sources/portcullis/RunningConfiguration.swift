import ConfigurationReading
import Foundation
import Gateway
import JOSE

/// What a running `serve` started with, as fingerprints, in `keys/running-configuration.json`
/// (mode 0600): `config check` compares a file with it and says what a reload would not put in
/// force (a key that waits for a restart) or would refuse (a sign-in provider changed).
///
/// Only salted SHA-256 fingerprints of the values are kept, never the values (a storage URL may
/// hold a password; the salt is random per start, so a guess costs a hash per guess and per file).
/// The file names its process by pid and start time (a pid reused after a crash is another
/// process); once that process is gone the file says nothing, and only its own process removes it.
struct RunningConfiguration: Codable, Equatable {
    let pid: Int32
    /// The process's start time as `/proc/PID/stat` gives it (clock ticks since boot).
    let startTime: String
    /// 32 random bytes, base64url, hashed before each value.
    let salt: String
    /// Each configuration key read at start, and its value's fingerprint.
    let keys: [String: String]
    /// The sign-in providers' settings' fingerprint.
    let signIns: String

    static let fileName = "running-configuration.json"

    /// This process's values under a new salt, or another file's values under `salt` (to compare with it).
    init(pid: Int32, values: ConfigurationValues, gateway: GatewayConfiguration, salt: String? = nil) throws {
        self.pid = pid
        startTime = Self.startTime(of: pid) ?? ""
        let salt = try salt ?? Base64URL.encode(try SecureRandom.bytes(32))
        self.salt = salt
        keys = try values.readValues.mapValues { try Digest.sha256Base64URL(salt + "\n" + $0) }
        signIns = try Digest.sha256Base64URL(salt + "\n" + GatewayServices.signInText(gateway.trust))
    }

    /// Writes it into `directory`, replacing an earlier one (a start's; a failure to write is not the start's failure).
    func write(into directory: String) throws {
        let path = directory + "/" + Self.fileName
        let data = try JSONEncoder().encode(self)
        let temporary = path + ".\(pid).tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw CLIError("cannot write \(temporary)")
        }
        guard rename(temporary, path) == 0 else { throw CLIError("cannot replace \(path)") }
    }

    /// The running process's, from `directory`: `nil` when there is none, it cannot be read, or
    /// the process that wrote it is gone (its pid free, or another process's now).
    static func read(from directory: String) -> RunningConfiguration? {
        guard let data = FileManager.default.contents(atPath: directory + "/" + fileName),
            let running = try? JSONDecoder().decode(RunningConfiguration.self, from: data), running.pid > 0
        else { return nil }
        // Without /proc (not Linux) the start time is unknown: the pid alone names the process then.
        if running.startTime.isEmpty { return kill(running.pid, 0) == 0 || errno == EPERM ? running : nil }
        return startTime(of: running.pid) == running.startTime ? running : nil
    }

    /// Removes the file from `directory` when it is this process's (another serve in the same
    /// directory may have written it since).
    static func remove(from directory: String, pid: Int32) {
        let path = directory + "/" + fileName
        guard let data = FileManager.default.contents(atPath: path), let written = try? JSONDecoder().decode(RunningConfiguration.self, from: data),
            written.pid == pid, written.startTime == (startTime(of: pid) ?? "")
        else { return }
        try? FileManager.default.removeItem(atPath: path)
    }

    /// What a reload of `next` (made with this file's salt) would do to the process that wrote
    /// this: the keys whose new value waits for a restart, and whether it would be refused for a
    /// sign-in provider's change.
    func reload(of next: RunningConfiguration) -> (restartKeys: [String], refusedForSignIns: Bool) {
        let changed = Set(keys.keys).union(next.keys.keys).filter { keys[$0] != next.keys[$0] }
        return (changed.filter { !GatewayServices.isLive($0) }.sorted(), signIns != next.signIns)
    }

    /// Field 22 of `/proc/PID/stat` (after the parenthesised command name, which may hold spaces).
    static func startTime(of pid: Int32) -> String? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After ")": state is field 3, so start time (field 22) is the 20th.
        return fields.count > 19 ? String(fields[19]) : nil
    }
}
