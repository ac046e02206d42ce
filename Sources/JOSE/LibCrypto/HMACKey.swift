import CLibCrypto
import Synchronization

/// An HMAC key: keyed once at load, then reused without re-keying.
///
/// OpenSSL 3's one-shot `HMAC()` fetches the digest and re-keys (hashes the
/// padded key twice) on every call. Here the key is set once per context;
/// each operation re-initialises a keyed context in place
/// (`EVP_MAC_init` with no key, which restores the precomputed inner and
/// outer states) and returns it to a small pool, so a verification performs
/// no allocation and no key schedule. The pool is what makes the contexts
/// shareable across threads: each context is used by one thread at a time.
final class HMACKey: Sendable {
    /// The secret, kept so the key can be written to `keys/`. Never logged.
    let secret: [UInt8]
    let outputLength: Int
    private let digestName: String
    private let pool: Mutex<ContextStack>

    /// Idle keyed contexts. `@unchecked Sendable`: only touched under the pool's lock,
    /// and a popped context belongs to the one caller that popped it.
    private struct ContextStack: ~Copyable, @unchecked Sendable {
        var contexts: [OpaquePointer] = []
    }

    /// Most contexts kept idle: one per thread that may verify at once is plenty.
    private static let poolLimit = 16

    private static let hmac: MACAlgorithm = {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else {
            preconditionFailure("libcrypto has no HMAC: \(LibCryptoError.drain("EVP_MAC_fetch"))")
        }
        return MACAlgorithm(pointer: mac)
    }()

    private struct MACAlgorithm: @unchecked Sendable {
        // An EVP_MAC is immutable after fetch and shared freely.
        let pointer: OpaquePointer
    }

    init(secret: [UInt8], digestName: String, outputLength: Int) throws {
        self.secret = secret
        self.outputLength = outputLength
        self.digestName = digestName
        self.pool = Mutex(ContextStack())
        // Key one context now, so a bad key fails at load and not at first use.
        let first = try Self.keyedContext(secret: secret, digestName: digestName)
        pool.withLock { $0.contexts.append(first) }
    }

    deinit {
        pool.withLock { stack in
            for context in stack.contexts { EVP_MAC_CTX_free(context) }
            stack.contexts.removeAll()
        }
    }

    private static func keyedContext(secret: [UInt8], digestName: String) throws -> OpaquePointer {
        guard let context = EVP_MAC_CTX_new(hmac.pointer) else {
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_MAC_CTX_new"))")
        }
        // An OSSL_PARAM holds pointers to its name and value, so both C strings
        // must stay alive until EVP_MAC_init has read them: nest the scopes.
        let ok = "digest".withCString { parameterName in
            digestName.withCString { value -> Bool in
                var params = [
                    OSSL_PARAM_construct_utf8_string(parameterName, UnsafeMutablePointer(mutating: value), 0),
                    OSSL_PARAM_construct_end(),
                ]
                return secret.withUnsafeBufferPointer { key in
                    EVP_MAC_init(context, key.baseAddress, key.count, &params) == 1
                }
            }
        }
        guard ok else {
            EVP_MAC_CTX_free(context)
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_MAC_init"))")
        }
        return context
    }

    /// Runs `body` with a keyed context to itself; `nil` if none could be made.
    private func withContext<T>(_ body: (OpaquePointer) -> T) -> T? {
        let pooled = pool.withLock { $0.contexts.popLast() }
        guard let context = pooled ?? (try? Self.keyedContext(secret: secret, digestName: digestName)) else {
            LibCryptoError.clearQueue()
            return nil
        }
        let result = body(context)
        let kept = pool.withLock { stack -> Bool in
            guard stack.contexts.count < Self.poolLimit else { return false }
            stack.contexts.append(context)
            return true
        }
        if !kept { EVP_MAC_CTX_free(context) }
        return result
    }

    /// Computes the MAC of `message` into `output` (at least 64 bytes); false if libcrypto failed.
    private func mac(_ message: UnsafeRawBufferPointer, into output: UnsafeMutableBufferPointer<UInt8>) -> Bool {
        withContext { context in
            var length = 0
            // A NULL key re-initialises the context with the key it already holds.
            let ok = EVP_MAC_init(context, nil, 0, nil) == 1
                && EVP_MAC_update(context, message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count) == 1
                && EVP_MAC_final(context, output.baseAddress, &length, output.count) == 1
                && length == outputLength
            if !ok { LibCryptoError.clearQueue() }
            return ok
        } ?? false
    }

    /// The MAC of `message`, or `nil` if libcrypto failed (queue cleared).
    func authenticate(_ message: UnsafeRawBufferPointer) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 64)
        let ok = out.withUnsafeMutableBufferPointer { mac(message, into: $0) }
        guard ok else { return nil }
        out.removeLast(64 - outputLength)
        return out
    }

    /// Checks `tag` against the MAC of `message` in constant time
    /// (`CRYPTO_memcmp`); the tag's length is public and checked first.
    /// The MAC is computed into stack memory: no allocation per check.
    func verify(tag: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer) -> Bool {
        guard tag.count == outputLength else { return false }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { output in
            mac(message, into: output) && CRYPTO_memcmp(output.baseAddress, tag.baseAddress, outputLength) == 0
        }
    }
}
