import Foundation
import Synchronization

/// A key ring over a `keys/` directory that picks up changes while running.
///
/// Verification reads an immutable `KeySet` snapshot under a lock (no I/O);
/// `reloadIfChanged()`, which does file I/O, is for a background task on a
/// thread pool. A reload that fails keeps the previous keys and reports why.
public final class LiveKeyRing: VerificationKeyProvider, SigningKeyProvider {
    public let directory: KeyDirectory
    /// What the first load had to say (a world-readable key, a stray file).
    public let initialWarnings: [String]
    private let state: Mutex<(keySet: KeySet, stamp: String)>

    /// Loads the directory once; throws if it cannot be loaded.
    public init(directory: KeyDirectory) throws {
        self.directory = directory
        let loaded = try directory.load()
        self.initialWarnings = loaded.warnings
        self.state = Mutex((loaded.keySet, Self.stamp(of: directory)))
    }

    /// The current snapshot.
    public var keySet: KeySet { state.withLock { $0.keySet } }

    public func verificationKey(forKID kid: String) -> JWSKey? {
        state.withLock { $0.keySet.verificationKey(forKID: kid) }
    }

    public func currentSigningKey() throws -> JWSKey {
        try keySet.currentSigningKey()
    }

    /// Reloads if any file in the directory changed (names, sizes, times).
    ///
    /// - Returns: `true` if a new key set was installed.
    /// - Throws: the load error; the previous key set stays in use.
    @discardableResult
    public func reloadIfChanged() throws -> Bool {
        let stamp = Self.stamp(of: directory)
        if state.withLock({ $0.stamp == stamp }) { return false }
        let loaded = try directory.load()
        state.withLock { $0 = (loaded.keySet, stamp) }
        return true
    }

    /// A cheap fingerprint of the directory: each file's name, size and modification time.
    static func stamp(of directory: KeyDirectory) -> String {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.sorted().map { name -> String in
            let attributes = try? FileManager.default.attributesOfItem(atPath: directory.path + "/" + name)
            let size = attributes?[.size] as? Int ?? -1
            let modified = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
            return "\(name):\(size):\(modified)"
        }.joined(separator: "|")
    }
}
