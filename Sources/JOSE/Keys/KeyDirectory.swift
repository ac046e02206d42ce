import Foundation

/// The `keys/` directory: one `<kid>.pem` (PKCS#8) per asymmetric key, one
/// `<kid>.jwk` per symmetric key, and `keyring.json` recording each key's
/// `alg` and status. Private files are written with mode 0600.
///
/// File access is blocking: a server calls these from a thread pool.
public struct KeyDirectory: Sendable {
    public let path: String

    /// One `keyring.json` record.
    public struct Record: Sendable, Equatable {
        public var kid: String
        public var algorithm: JWSAlgorithm
        public var status: KeyStatus
        public var createdAt: Double

        var json: JSONValue {
            ["kid": .string(kid), "alg": .string(algorithm.rawValue), "status": .string(status.rawValue), "created_at": .number(createdAt)]
        }
    }

    /// A key set read from disk, with anything a person should hear about.
    public struct Loaded: Sendable {
        public let keySet: KeySet
        /// Warnings such as a world-readable private key or a stray file.
        public let warnings: [String]
    }

    public init(path: String) {
        self.path = path
    }

    var keyringPath: String { path + "/keyring.json" }

    func file(for record: Record) -> String {
        path + "/" + record.kid + (record.algorithm.family == .hmac ? ".jwk" : ".pem")
    }

    // MARK: keyring.json

    /// The records of `keyring.json`; empty if the file does not exist yet.
    public func records() throws -> [Record] {
        guard FileManager.default.fileExists(atPath: keyringPath) else { return [] }
        let bytes = try readFile(keyringPath)
        let document: JSONObject
        do {
            document = try StrictJSONReader().parseObject(bytes)
        } catch {
            throw KeyError(.invalidKey, "\(keyringPath) is not valid JSON: \(error.message)")
        }
        guard case .array(let list)? = document["keys"] else {
            throw KeyError(.invalidKey, "\(keyringPath) has no \"keys\" array")
        }
        return try list.enumerated().map { index, value in
            guard let object = value.objectValue, let kid = object["kid"]?.stringValue, KeyID.isValid(kid) else {
                throw KeyError(.invalidKeyID, "\(keyringPath): entry \(index) has no valid \"kid\" (1-128 of A-Z a-z 0-9 - _)")
            }
            guard let alg = object["alg"]?.stringValue, let algorithm = JWSAlgorithm(rawValue: alg) else {
                throw KeyError(.unsupported, "\(keyringPath): key \(kid) has no supported \"alg\"")
            }
            guard let state = object["status"]?.stringValue, let status = KeyStatus(rawValue: state) else {
                throw KeyError(.invalidKey, "\(keyringPath): key \(kid) has no \"status\" of next, active or retired")
            }
            return Record(kid: kid, algorithm: algorithm, status: status, createdAt: object["created_at"]?.numberValue ?? 0)
        }
    }

    /// Rewrites `keyring.json` atomically (write a temporary file, then rename).
    public func writeRecords(_ records: [Record]) throws {
        let document: JSONValue = ["keys": .array(records.map(\.json))]
        try writeFileAtomically(keyringPath, Array((JSONWriter.pretty(document) + "\n").utf8), mode: 0o644)
    }

    // MARK: Loading

    /// Loads every key named in `keyring.json`, each bound to its recorded `alg`.
    public func load() throws -> Loaded {
        var warnings: [String] = []
        var entries: [KeySet.Entry] = []
        let records = try records()
        for record in records {
            let file = file(for: record)
            guard FileManager.default.fileExists(atPath: file) else {
                throw KeyError(.invalidKey, "keyring.json lists \(record.kid) but \(file) does not exist")
            }
            if let mode = try? FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int, mode & 0o077 != 0 {
                warnings.append("\(file) is readable by other users (mode \(String(mode, radix: 8))); run chmod 600 \(file)")
            }
            let key: JWSKey
            do {
                key = try Self.loadKey(file: file, kid: record.kid, algorithm: record.algorithm)
            } catch let error as KeyError {
                throw KeyError(error.code, "\(file): \(error.message)")
            }
            entries.append(KeySet.Entry(key: key, status: record.status))
        }
        if let names = try? FileManager.default.contentsOfDirectory(atPath: path) {
            let known = Set(records.map { file(for: $0) })
            for name in names.sorted() where (name.hasSuffix(".pem") || name.hasSuffix(".jwk")) && !known.contains(path + "/" + name) {
                warnings.append("\(path)/\(name) is not listed in keyring.json and is ignored")
            }
        }
        return Loaded(keySet: try KeySet(entries), warnings: warnings)
    }

    /// Reads one key file and binds it to `algorithm`.
    public static func loadKey(file: String, kid: String, algorithm: JWSAlgorithm) throws -> JWSKey {
        var bytes = try readFile(file)
        defer { for index in bytes.indices { bytes[index] = 0 } }
        if algorithm.family == .hmac {
            let object: JSONObject
            do { object = try StrictJSONReader().parseObject(bytes) } catch {
                throw KeyError(.invalidKey, "the symmetric key file is not a JSON JWK")
            }
            let key = try JWSKey(jwk: object, fallbackAlgorithm: algorithm)
            guard key.algorithm == algorithm, key.kid == kid else {
                throw KeyError(.algorithmMismatch, "the JWK says \(key.algorithm.rawValue)/\(key.kid) but keyring.json says \(algorithm.rawValue)/\(kid)")
            }
            return key
        }
        return try JWSKey(pem: String(decoding: bytes, as: UTF8.self), algorithm: algorithm, kid: kid)
    }

    // MARK: Changing

    /// Generates a key, writes its file (0600) and records it.
    ///
    /// - Parameter status: `nil` makes the key `active` if none is, else `next`.
    @discardableResult
    public func generate(algorithm: JWSAlgorithm, kid: String? = nil, status: KeyStatus? = nil, rsaBits: Int = 2048, now: Double = SystemClock().now()) throws -> Record {
        if let kid {
            guard KeyID.isValid(kid) else { throw KeyError(.invalidKeyID, "the kid must be 1-128 characters of A-Z, a-z, 0-9, '-' and '_'") }
        }
        return try add(try JWSKey.generate(algorithm: algorithm, kid: kid, rsaBits: rsaBits), status: status, now: now)
    }

    /// Adds a key made elsewhere (`portcullis keys import`): writes its file (0600) under its
    /// kid, as `generate` does, and records it.
    ///
    /// A private key (or HMAC secret) may be `next` or `active` (`nil`: active if none is,
    /// else next). A public key alone cannot sign: it is added `retired` (published and
    /// verifying), and asking for `next` or `active` is refused.
    @discardableResult
    public func add(_ key: JWSKey, status: KeyStatus? = nil, now: Double = SystemClock().now()) throws -> Record {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var records = try records()
        // A thumbprint kid is base64url, always within the file-name-safe set; a chosen one is checked.
        guard KeyID.isValid(key.kid) else { throw KeyError(.invalidKeyID, "the kid must be 1-128 characters of A-Z, a-z, 0-9, '-' and '_'") }
        guard !records.contains(where: { $0.kid == key.kid }) else {
            throw KeyError(.invalidKeyID, "a key with the kid \(key.kid) already exists")
        }
        let resolvedStatus: KeyStatus
        if key.canSign {
            resolvedStatus = status ?? (records.contains { $0.status == .active } ? .next : .active)
        } else {
            guard status == nil || status == .retired else {
                throw KeyError(.invalidKey, "a public key cannot sign, so it cannot be \(status!.rawValue); import the private key, or import this one without --state to verify with it")
            }
            resolvedStatus = .retired
        }
        if resolvedStatus == .active, let current = records.firstIndex(where: { $0.status == .active }) {
            throw KeyError(.invalidKey, "key \(records[current].kid) is already active; add this one with --state next and run `portcullis keys rotate`")
        }
        let record = Record(kid: key.kid, algorithm: key.algorithm, status: resolvedStatus, createdAt: now.rounded(.down))
        let contents: [UInt8] =
            key.algorithm.family == .hmac
            ? JSONWriter.bytes(.object(try key.secretJWK())) + [0x0A]
            : Array(try (key.canSign ? key.privatePEM() : key.publicPEM()).utf8)
        try Self.writeNewFile(file(for: record), contents, mode: 0o600)
        records.append(record)
        try writeRecords(records)
        return record
    }

    /// Rotates: the `next` key becomes `active` and the active key `retired`.
    ///
    /// Refuses when there is no `next` key: a key must be published before it
    /// signs, so that downstream caches already hold it.
    @discardableResult
    ///
    /// - Parameter kid: the next key to activate; `nil`: the oldest next key (the first generated,
    ///   published longest). A `kid` that is not a next key is refused.
    public func rotate(kid: String? = nil) throws -> (activated: Record, retired: Record?, waiting: Int) {
        var records = try records()
        let waiting = records.filter { $0.status == .next }.count
        let nextIndex: Int
        if let kid {
            guard let index = records.firstIndex(where: { $0.kid == kid }) else { throw KeyError(.invalidKeyID, "no key has the kid \(JSONValue.clip(kid))") }
            guard records[index].status == .next else {
                throw KeyError(.invalidKey, "key \(JSONValue.clip(kid)) is \(records[index].status.rawValue), not next; only a published next key is activated")
            }
            nextIndex = index
        } else {
            guard let index = records.firstIndex(where: { $0.status == .next }) else {
                throw KeyError(.invalidKey, "there is no next key to activate; run `portcullis keys generate --alg ALG --state next` first and let it be published")
            }
            nextIndex = index
        }
        var retired: Record? = nil
        if let activeIndex = records.firstIndex(where: { $0.status == .active }) {
            records[activeIndex].status = .retired
            retired = records[activeIndex]
        }
        records[nextIndex].status = .active
        try writeRecords(records)
        return (records[nextIndex], retired, waiting)
    }

    /// Marks `kid` retired (verify-only). Retiring the active key leaves nothing signing until a rotation.
    @discardableResult
    public func retire(kid: String) throws -> Record {
        var records = try records()
        guard let index = records.firstIndex(where: { $0.kid == kid }) else {
            throw KeyError(.invalidKeyID, "no key has the kid \(JSONValue.clip(kid))")
        }
        records[index].status = .retired
        try writeRecords(records)
        return records[index]
    }

    // MARK: Files

    static func readFile(_ path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw KeyError(.invalidKey, "cannot read \(path): the file is missing or unreadable")
        }
        return [UInt8](data)
    }

    func readFile(_ path: String) throws -> [UInt8] { try Self.readFile(path) }

    /// Creates a file that must not exist yet, with `mode` from the start (never briefly world-readable).
    /// Creates `path` (it must not exist: `O_EXCL`) with `bytes` and `mode`, synced; a partial file is removed.
    package static func writeNewFile(_ path: String, _ bytes: [UInt8], mode: mode_t) throws(KeyError) {
        // Written whole under a name of this process's, then linked in place: `link` fails if the
        // name exists (as O_EXCL would), and another process starting at the same moment never
        // reads the file empty or half written.
        let temporary = path + ".new-\(getpid())"
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL, mode)
        guard descriptor >= 0 else { throw KeyError(.invalidKey, "cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { unlink(temporary) }
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count, fsync(descriptor) == 0 else {
            close(descriptor)
            throw KeyError(.invalidKey, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        close(descriptor)
        guard link(temporary, path) == 0 else { throw KeyError(.invalidKey, "cannot create \(path): \(String(cString: strerror(errno)))") }
    }

    func writeFileAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t) throws {
        let temporary = path + ".tmp-\(getpid())"
        unlink(temporary)
        try Self.writeNewFile(temporary, bytes, mode: mode)
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw KeyError(.invalidKey, "cannot replace \(path): \(String(cString: strerror(errno)))")
        }
    }
}
