import JOSE
import NIOCore
import NIOPosix

/// Hashes and checks passwords with scrypt on NIO's blocking thread pool.
///
/// scrypt at N = 2^15 takes tens of milliseconds and 32 MiB; on this
/// project's 2-core machines one such call on the cooperative pool would
/// halve the gateway, so every call here is moved to `NIOThreadPool`.
public struct PasswordHasher: Sendable {
    public let parameters: Scrypt.Parameters
    let threadPool: NIOThreadPool

    public init(parameters: Scrypt.Parameters = .interactive, threadPool: NIOThreadPool = .singleton) {
        self.parameters = parameters
        self.threadPool = threadPool
    }

    /// Keeps scrypt's work areas for the life of a server process, one per thread of NIO's
    /// blocking pool (where the singleton hasher runs): resident memory stays flat and a login
    /// stops paying to map and fault in 32 MiB. A one-off command need not call it.
    /// - Returns: false when libcrypto's allocator could not be wrapped (nothing is kept then).
    @discardableResult
    public static func keepWorkAreas(for parameters: Scrypt.Parameters = .interactive) -> Bool {
        ScryptWorkAreas.keep(workAreaLimit, for: parameters)
    }

    /// The areas `keepWorkAreas` keeps at most: the blocking pool's threads, which bound the checks in flight.
    public static var workAreaLimit: Int { NIOSingletons.blockingPoolThreadCountSuggestion }

    /// A new hash of `password` with a fresh 16-byte salt.
    public func hash(_ password: String) async throws -> PasswordHash {
        let parameters = self.parameters
        let salt = try SecureRandom.bytes(16)
        let bytes = Array(password.utf8)
        let derived = try await threadPool.runIfActive { try Scrypt.derive(password: bytes, salt: salt, parameters: parameters) }
        return PasswordHash(parameters: parameters, salt: salt, hash: derived)
    }

    /// True if `password` matches `stored`, compared in constant time.
    public func verify(_ password: String, against stored: PasswordHash) async throws -> Bool {
        let bytes = Array(password.utf8)
        let derived = try await threadPool.runIfActive {
            try Scrypt.derive(password: bytes, salt: stored.salt, parameters: stored.parameters, length: stored.hash.count)
        }
        return Scrypt.constantTimeEquals(derived, stored.hash)
    }

    /// Spends the same work as a real check, for an account that does not exist,
    /// so that "no such user" and "wrong password" take about the same time.
    public func verifyAgainstDummy(_ password: String) async throws {
        let dummy = PasswordHash(parameters: parameters, salt: [UInt8](repeating: 0x5A, count: 16), hash: [UInt8](repeating: 0, count: 32))
        _ = try await verify(password, against: dummy)
    }
}
