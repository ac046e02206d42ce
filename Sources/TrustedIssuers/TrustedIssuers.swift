import ConfigurationReading
import Foundation
import JOSE
import Logging
import ServiceLifecycle
import Synchronization

/// The trusted identity providers at run time: each one's keys, fetched off the
/// hot path, and the check of a token against the keys of the issuer its `iss`
/// names, and no other.
///
/// A token's `iss` selects its issuer's keys and nothing else: one issuer's key
/// never verifies another's token, and the gateway's own keys are never here
/// (no trusted issuer may claim the gateway's issuer). As a `Service`, it
/// fetches every issuer's keys at start (start does not wait for them, and
/// does not fail while a provider is down) and refreshes them before their
/// max-age ends, backing off while a provider fails.
public final class TrustedIssuers: Service, Sendable {
    /// The issuers in force and their key state; a reload (`apply`) replaces both at once.
    private struct Registry: Sendable {
        var configuration: TrustConfiguration
        var byIssuer: [String: IssuerKeys]
        /// One JWKS fetcher per CA file (its HTTP client), shared by the issuers that name it.
        var fetchers: [String: KeyFetcher]
    }

    private let registry: Mutex<Registry>
    private let leeway: Double
    private let clock: any TokenClock
    private let logger: Logger

    /// Loads the shared secrets and prepares the fetchers; fetches nothing yet.
    ///
    /// - Throws: `ConfigurationError` naming `trust.issuers[N].secret_file` when a secret
    ///   cannot be used (readable by others, a trailing newline, too short for its algorithm).
    public init(configuration: TrustConfiguration, leeway: Double, clock: any TokenClock = SystemClock(), logger: Logger) throws {
        self.logger = logger
        self.clock = clock
        self.leeway = leeway
        var fetchers: [String: KeyFetcher] = [:]
        let byIssuer = try Self.keys(for: configuration, keeping: [:], fetchers: &fetchers, leeway: leeway, clock: clock)
        registry = Mutex(Registry(configuration: configuration, byIssuer: byIssuer, fetchers: fetchers))
    }

    /// The issuers in force.
    public var configuration: TrustConfiguration { registry.withLock { $0.configuration } }

    /// Puts `configuration` in force (a configuration reload): an issuer configured as before keeps
    /// its key state; a changed one keeps the keys it fetched when it fetches from the same place;
    /// a new one starts without keys and is fetched by `run` at once; a removed one is forgotten
    /// (its tokens are refused from the next request on).
    ///
    /// - Returns: whether anything changed (the caller forgets tokens it verified before).
    /// - Throws: `ConfigurationError` as `init` does; nothing changes then.
    @discardableResult
    public func apply(_ configuration: TrustConfiguration) throws -> Bool {
        let (current, kept) = registry.withLock { ($0.configuration, $0) }
        guard current != configuration else { return false }
        var fetchers = kept.fetchers
        let previous = Dictionary(current.issuers.map { ($0.issuer, $0) }, uniquingKeysWith: { first, _ in first })
        let unchanged = kept.byIssuer.filter { previous[$0.key].map { old in configuration.issuers.contains(old) } ?? false }
        let byIssuer = try Self.keys(for: configuration, keeping: unchanged, fetchers: &fetchers, leeway: leeway, clock: clock)
        // A changed issuer that fetches from the same place starts with the keys it held.
        for (name, keys) in byIssuer where unchanged[name] == nil {
            if let before = kept.byIssuer[name] { keys.adoptKeys(of: before) }
        }
        registry.withLock { $0 = Registry(configuration: configuration, byIssuer: byIssuer, fetchers: fetchers) }
        return true
    }

    /// The key state of each issuer of `configuration`: the one in `keeping` when there is one,
    /// else a new one (its shared secret read now).
    private static func keys(
        for configuration: TrustConfiguration, keeping: [String: IssuerKeys], fetchers: inout [String: KeyFetcher], leeway: Double, clock: any TokenClock
    ) throws -> [String: IssuerKeys] {
        var byIssuer: [String: IssuerKeys] = [:]
        for (index, issuer) in configuration.issuers.enumerated() {
            if let kept = keeping[issuer.issuer] {
                byIssuer[issuer.issuer] = kept
                continue
            }
            var secret: [JWSKey]?
            var fetcher: KeyFetcher?
            if case .secret(let file) = issuer.keySource {
                secret = try Self.loadSecret(file, algorithms: issuer.algorithms ?? [.hs256], key: "trust.issuers[\(index)].secret_file")
            } else {
                let caKey = issuer.caFile ?? ""
                if fetchers[caKey] == nil { fetchers[caKey] = KeyFetcher(caFile: issuer.caFile) }
                fetcher = fetchers[caKey]
            }
            byIssuer[issuer.issuer] = IssuerKeys(issuer: issuer, leeway: leeway, clock: clock, fetcher: fetcher, secret: secret)
        }
        return byIssuer
    }

    private var byIssuer: [String: IssuerKeys] { registry.withLock { $0.byIssuer } }

    /// The key state of `issuer`; `nil` for an issuer not configured.
    func keys(of issuer: String) -> IssuerKeys? { byIssuer[issuer] }

    /// Whether tokens whose `iss` is `issuer` are this registry's to check.
    public func handles(issuer: String) -> Bool { byIssuer[issuer] != nil }

    public var isEmpty: Bool { byIssuer.isEmpty }

    /// Checks a parsed token whose (unverified) `iss` is `issuer` with that issuer's keys as held now.
    public func verify(_ jws: JWSCompact, claims: JSONObject, issuer: String) -> ExternalVerification {
        guard let keys = byIssuer[issuer] else { return .refused(TokenValidationError(.wrongIssuer, "the issuer is not trusted")) }
        return keys.verify(jws, claims: claims)
    }

    /// After `.keysMayHaveChanged`: joins the issuer's running fetch, or starts one if its cooldown
    /// allows, and waits for it a few seconds at most (`IssuerKeys.unknownKeyWait`).
    ///
    /// - Returns: `false` when the fetch had not ended by then (the caller answers 503 `issuer_unavailable`).
    public func refreshForUnknownKey(issuer: String) async -> Bool {
        guard let keys = byIssuer[issuer] else { return true }
        let fetched = await keys.refreshForUnknownKey()
        // Once per fetch: a burst of requests waiting on one slow fetch is one line.
        if !fetched, keys.isFirstToReportSlowFetch() {
            logger.warning(
                "a trusted issuer's keys were not fetched in time for a token with a new kid; it was answered 503",
                metadata: ["issuer": "\(issuer)", "waited_seconds": "\(IssuerKeys.unknownKeyWait.components.seconds)"])
        }
        return fetched
    }

    /// Fetches every issuer's keys now (concurrently), waiting for all.
    public func refreshAll() async {
        await withTaskGroup(of: Void.self) { group in
            for keys in byIssuer.values { group.addTask { await keys.refresh() } }
        }
    }

    /// The login endpoints of `issuer` as its discovery document last named them; `nil` before
    /// the first fetch, or when the document names no code flow (`IssuerStatus.endpoints` says why).
    public func endpoints(issuer: String) -> ProviderEndpoints? {
        byIssuer[issuer]?.endpoints
    }

    /// Every issuer's key state, in configuration order.
    public var statuses: [IssuerStatus] {
        let (configuration, byIssuer) = registry.withLock { ($0.configuration, $0.byIssuer) }
        return configuration.issuers.compactMap { byIssuer[$0.issuer]?.status }
    }

    /// Fetches at start, then refreshes whatever is due, four times a second, until the service group stops.
    public func run() async throws {
        var failing: Set<String> = []
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let now = clock.now()
            let due = byIssuer.values.filter { $0.isDue(at: now) }
            if !due.isEmpty {
                await withTaskGroup(of: Void.self) { group in
                    for keys in due { group.addTask { await keys.refresh() } }
                }
                for keys in due {
                    let status = keys.status
                    if let error = status.lastError {
                        if failing.insert(status.issuer).inserted {
                            logger.warning("trusted issuer keys cannot be fetched; known keys keep working up to max_stale_seconds", metadata: ["issuer": "\(status.issuer)", "error": "\(error)"])
                        }
                    } else {
                        if failing.remove(status.issuer) != nil { logger.info("trusted issuer keys fetched again", metadata: ["issuer": "\(status.issuer)"]) }
                        for skipped in status.skipped { logger.debug("a key of a trusted issuer's JWKS was left out", metadata: ["issuer": "\(status.issuer)", "key": "\(skipped)"]) }
                    }
                }
            }
            try? await Task.sleep(for: .milliseconds(250))
        }
    }

    /// Reads a shared HMAC secret as `keys import` would: private to its owner, no trailing newline, long enough.
    static func loadSecret(_ path: String, algorithms: [JWSAlgorithm], key: String) throws(ConfigurationError) -> [JWSKey] {
        let secret = try OwnerOnlyFile.read(path, key: key)
        // A newline ends a text secret (`echo` wrote it); random bytes end in 0x0A one time in 256.
        guard secret.last != UInt8(ascii: "\n") || String(validating: secret, as: UTF8.self) == nil else {
            throw ConfigurationError(fileKey: key, "names \(path), which ends with a newline; write the secret's bytes alone (printf '%s' \"$SECRET\" > \(path))")
        }
        do {
            return try algorithms.map { algorithm in try JWSKey(hmacSecret: secret, algorithm: algorithm, kid: "secret-" + algorithm.rawValue) }
        } catch let error as KeyError {
            throw ConfigurationError(fileKey: key, "names \(path): \(error.message)")
        } catch {
            throw ConfigurationError(fileKey: key, "names \(path), whose secret cannot be used")
        }
    }
}
