import ArgumentParser
import JOSE

#if canImport(Glibc)
import Glibc
#endif

/// `portcullis bench`: signing and full verification per second for each
/// algorithm, against raw libcrypto verification of the same signing input
/// measured in the same run. Run it from a release build.
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure token signing and verification against raw libcrypto (use a release build).",
        discussion: """
            For each algorithm: tokens signed per second; tokens fully verified per second \
            (parse, header rules, key lookup, signature, claims; no caching); raw libcrypto \
            signature verifications per second of the same signing input; and their ratio. \
            Full and raw verification alternate in paired batches of about a millisecond so that \
            machine noise hits both alike; the ratio is the median of the per-pair ratios. One thread.
            """
    )

    @Option(help: "Seconds to spend measuring each algorithm's verification (full and raw together).")
    var seconds: Double = 2

    @Option(help: "Algorithms to measure (repeatable; default all).")
    var alg: [JWSAlgorithm] = []

    @Flag(help: "Print a JSON array.")
    var json = false

    func validate() throws {
        guard seconds > 0, seconds <= 600 else { throw ValidationError("--seconds must be between 0 and 600") }
    }

    struct Row {
        let algorithm: JWSAlgorithm
        let tokenBytes: Int
        let signPerSecond: Double
        let verifyPerSecond: Double
        let rawPerSecond: Double
        /// Median over paired batches of raw time / full time.
        let ratio: Double
        let pairs: Int
    }

    func run() throws {
        let algorithms = alg.isEmpty ? JWSAlgorithm.allCases : alg
        var rows: [Row] = []
        if !json {
            print("alg     token  sign/s      verify/s    raw verify/s  ratio")
        }
        for algorithm in algorithms {
            let row = try measure(algorithm)
            rows.append(row)
            if !json {
                print(pad(row.algorithm.rawValue, 8) + pad("\(row.tokenBytes)B", 7) + pad(format(row.signPerSecond), 12)
                    + pad(format(row.verifyPerSecond), 12) + pad(format(row.rawPerSecond), 14) + String(format: "%.3f", row.ratio))
            }
        }
        if json {
            let array: JSONValue = .array(rows.map { row in
                ["alg": .string(row.algorithm.rawValue), "sign_per_s": .number(row.signPerSecond.rounded()),
                 "verify_per_s": .number(row.verifyPerSecond.rounded()), "raw_verify_per_s": .number(row.rawPerSecond.rounded()),
                 "ratio": .number((row.ratio * 1000).rounded() / 1000)]
            })
            print(JSONWriter.string(array))
        }
    }

    func measure(_ algorithm: JWSAlgorithm) throws -> Row {
        let key = try JWSKey.generate(algorithm: algorithm, kid: "k1")
        let keySet = try KeySet([.init(key: key, status: .active)])
        let now = SystemClock().now()
        // A realistic gateway token: every RFC 9068 claim, short identifiers (about 300 bytes for HS256).
        let issuer = AccessTokenIssuer(keys: keySet, issuer: "https://id.example", audience: "runtime", lifetime: 900, clock: FixedClock(now))
        let sample = try issuer.issue(subject: "u_7Hq2mW9x", tenantID: "t_acme", clientID: "web", scope: "agent")
        let verifier = AccessTokenVerifier(
            keys: keySet, policy: .gateway(issuer: "https://id.example", audience: "runtime"),
            clock: FixedClock(now + 1))
        let jws = try JWSCompact.parse(sample.token)
        let raw = try RawSignatureCheck(key: key, signingInput: jws.signingInput, jwsSignature: jws.signature)
        guard (try? verifier.verify(sample.token)) != nil, raw.run() else {
            throw CLIError("\(algorithm.rawValue): the benchmark token does not verify; nothing was measured")
        }
        let signingInput = jws.signingInput
        let signRate = try rate(budget: seconds / 4) { guard try key.sign(signingInput).count > 0 else { throw CLIError("empty signature") } }
        // Full and raw verification alternate in small paired batches (about a
        // millisecond each), so a burst of load from elsewhere hits both alike.
        // The ratio is the median of the per-pair ratios: robust to such bursts.
        let token = sample.token
        // Warm up (allocator, caches, lazily initialised tables) before measuring.
        _ = try timed(budget: min(0.2, seconds / 10)) { _ = try verifier.verify(token); _ = raw.run() }
        var batch = 1  // doubled until a pair of batches takes a millisecond
        var fullCount = 0.0, fullTime = 0.0, rawCount = 0.0, rawTime = 0.0
        var ratios: [Double] = []
        let deadline = monotonic() + seconds * 0.75
        repeat {
            let full = try timed(operations: batch) { _ = try verifier.verify(token) }
            let bare = try timed(operations: batch) { guard raw.run() else { throw CLIError("raw verification failed") } }
            fullCount += Double(batch)
            fullTime += full
            rawCount += Double(batch)
            rawTime += bare
            ratios.append(bare / full)
            if full + bare < 0.001 { batch *= 2 }
        } while monotonic() < deadline
        ratios.sort()
        return Row(
            algorithm: algorithm, tokenBytes: token.utf8.count, signPerSecond: signRate, verifyPerSecond: fullCount / fullTime,
            rawPerSecond: rawCount / rawTime, ratio: ratios[ratios.count / 2], pairs: ratios.count)
    }

    /// Seconds taken by `operations` runs of `body`.
    func timed(operations: Int, _ body: () throws -> Void) throws -> Double {
        let start = monotonic()
        for _ in 0..<operations { try body() }
        return monotonic() - start
    }

    func rate(budget: Double, _ body: () throws -> Void) throws -> Double {
        let result = try timed(budget: budget, body)
        return result.count / result.elapsed
    }

    /// Runs `body` in batches until `budget` seconds have passed.
    func timed(budget: Double, _ body: () throws -> Void) throws -> (count: Double, elapsed: Double) {
        var count = 0
        var batch = 16
        let start = monotonic()
        var elapsed = 0.0
        repeat {
            for _ in 0..<batch { try body() }
            count += batch
            elapsed = monotonic() - start
            if elapsed < budget / 20 { batch *= 2 }
        } while elapsed < budget
        return (Double(count), elapsed)
    }

    func monotonic() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    func format(_ value: Double) -> String {
        String(Int(value.rounded()))
    }

    func pad(_ text: String, _ width: Int) -> String {
        text.padding(toLength: max(width, text.count + 1), withPad: " ", startingAt: 0)
    }
}
