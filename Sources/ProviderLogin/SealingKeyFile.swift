import ConfigurationReading
import Foundation
import JOSE

/// A sealing key kept in the keys directory: made on first start (32 bytes from the CSPRNG,
/// base64url, mode 0600; created with `O_EXCL`, so two instances starting at once read the one
/// that won) and shared by every instance through the directory, as the signing keys are.
public enum SealingKeyFile {
    /// Reads the key at `path`, making it when there is none.
    ///
    /// - Parameter consequence: what removing the file costs, for the message about a bad one.
    /// - Throws: `ConfigurationError` naming the file when it cannot be read, is readable by
    ///   others, or does not hold 32 bytes.
    public static func load(_ path: String, consequence: String) throws(ConfigurationError) -> SealingKey {
        if !FileManager.default.fileExists(atPath: path) {
            // On a first start the keys directory may not exist yet (the signing key is made after the configuration is read).
            let directory = (path as NSString).deletingLastPathComponent
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            do {
                let made = try SealingKey.generate()
                try KeyDirectory.writeNewFile(path, Array((try made.exportedText() + "\n").utf8), mode: 0o600)
            } catch {
                // Another instance starting at the same moment made it first (O_EXCL): read that one.
                guard FileManager.default.fileExists(atPath: path) else {
                    throw ConfigurationError(fileKey: "keys.directory", "names a directory where \(path) cannot be made: \(error)")
                }
            }
        }
        let text = String(decoding: try OwnerOnlyFile.read(path, key: "keys.directory"), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let bytes = Base64URL.decode(text), let key = try? SealingKey(bytes: bytes) else {
            throw ConfigurationError(fileKey: "keys.directory", "holds \(path), which must hold 32 bytes, base64url; remove it to have a new one made (\(consequence))")
        }
        return key
    }
}
