import Foundation

/// A credential file the configuration names (a shared secret, a client secret, a private key):
/// read whole, and refused when other users may read it.
public enum OwnerOnlyFile {
    /// The file's bytes.
    ///
    /// - Parameter key: the configuration key that names it, for the message.
    /// - Throws: `ConfigurationError` naming `key` when the file cannot be read, is empty, or
    ///   its mode lets the group or others read it.
    public static func read(_ path: String, key: String) throws(ConfigurationError) -> [UInt8] {
        let mode = (try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
        guard mode >= 0, let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(fileKey: key, "names \(path), which cannot be read")
        }
        guard mode & 0o077 == 0 else {
            throw ConfigurationError(fileKey: key, "names \(path), which others can read (mode \(String(mode, radix: 8))); run chmod 600 \(path)")
        }
        guard !data.isEmpty else { throw ConfigurationError(fileKey: key, "names \(path), which is empty") }
        return [UInt8](data)
    }
}
