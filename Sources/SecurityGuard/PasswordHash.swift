// SecurityGuard: credentials — password hashing, login, token issue and verify, refresh rotation, revocation.
import JOSE

/// A stored password hash that names its own algorithm and parameters:
/// `$scrypt$ln=15,r=8,p=1$<salt>$<hash>` (salt and hash in base64url).
///
/// Self-describing so the cost can be raised later without losing old hashes.
public struct PasswordHash: Sendable, Equatable, CustomStringConvertible {
    public let parameters: Scrypt.Parameters
    public let salt: [UInt8]
    public let hash: [UInt8]

    public init(parameters: Scrypt.Parameters, salt: [UInt8], hash: [UInt8]) {
        self.parameters = parameters
        self.salt = salt
        self.hash = hash
    }

    /// The stored form.
    public var description: String {
        "$scrypt$ln=\(parameters.logN),r=\(parameters.r),p=\(parameters.p)$\(Base64URL.encode(salt))$\(Base64URL.encode(hash))"
    }

    /// Parses the stored form; `nil` for anything else (including parameters out of range).
    public init?(_ text: String) {
        let parts = text.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "scrypt" else { return nil }
        var values: [String: Int] = [:]
        for pair in parts[2].split(separator: ",") {
            let kv = pair.split(separator: "=")
            guard kv.count == 2, let value = Int(kv[1]), values.updateValue(value, forKey: String(kv[0])) == nil else { return nil }
        }
        guard values.count == 3, let logN = values["ln"], let r = values["r"], let p = values["p"] else { return nil }
        let parameters = Scrypt.Parameters(logN: logN, r: r, p: p)
        guard parameters.isWithinLimits,
            let salt = Base64URL.decode(String(parts[3])), salt.count >= 16,
            let hash = Base64URL.decode(String(parts[4])), hash.count >= 32
        else { return nil }
        self.init(parameters: parameters, salt: salt, hash: hash)
    }
}
