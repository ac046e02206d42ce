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
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(fileKey: key, "names \(path), which cannot be read")
        }
        if let mode = modeOthersCanRead(path) {
            throw ConfigurationError(fileKey: key, "names \(path), which others can read (mode \(mode)); run chmod 600 \(path)")
        }
        guard !data.isEmpty else { throw ConfigurationError(fileKey: key, "names \(path), which is empty") }
        return [UInt8](data)
    }

    /// The file's mode in octal when its group or other users may read or write it; `nil` when only
    /// its owner may (or when it cannot be read at all: reading it then says so).
    public static func modeOthersCanRead(_ path: String) -> String? {
        guard let mode = try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int, mode & 0o077 != 0 else { return nil }
        return String(mode, radix: 8)
    }
}
