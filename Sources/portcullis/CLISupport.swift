import ArgumentParser
import Foundation
import JOSE

/// A usage or configuration error: printed as one line, exit code 2.
struct CLIError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// Output helpers: results on stdout, diagnostics on stderr.
enum Terminal {
    static func error(_ message: String) {
        FileHandle.standardError.write(Data("portcullis: error: \(message)\n".utf8))
    }

    static func warning(_ message: String) {
        FileHandle.standardError.write(Data("portcullis: warning: \(message)\n".utf8))
    }

    static func note(_ message: String) {
        FileHandle.standardError.write(Data("portcullis: note: \(message)\n".utf8))
    }
}

enum TokenInput {
    /// The token exactly as given: the argument byte for byte (never trimmed: security
    /// suites feed exact bytes, and `" eyJ..."` is not a token), or stdin when the
    /// argument is absent or `-`, less one trailing newline (`echo` adds one; a second,
    /// or any other whitespace, stays and makes the token malformed). An empty token is
    /// returned as it is: the parser refuses it as `malformed` (exit 1), not as a usage error.
    static func read(_ argument: String?) throws -> String {
        if let argument, argument != "-" { return argument }
        let data = FileHandle.standardInput.readDataToEndOfFile()
        guard var text = String(data: data, encoding: .utf8) else { throw CLIError("stdin is not UTF-8 text") }
        // One line ending: "\n", or "\r\n" (one Character in Swift, so one removeLast).
        if text.hasSuffix("\r\n") || text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}

/// Durations such as `900`, `90s`, `15m`, `2h`, `1d`.
struct Duration: ExpressibleByArgument {
    let seconds: Double
    /// As it was written (`15m`): what `--help` shows as the default.
    let text: String

    var defaultValueDescription: String { text }

    init?(argument: String) {
        text = argument
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        var text = argument
        var multiplier = 1.0
        if let last = text.last, let unit = units[last] {
            multiplier = unit
            text.removeLast()
        }
        guard let value = Double(text), value.isFinite, value > 0 else { return nil }
        seconds = value * multiplier
    }
}

extension JWSAlgorithm: ExpressibleByArgument {
    public init?(argument: String) {
        guard let algorithm = JWSAlgorithm.allCases.first(where: { $0.rawValue.lowercased() == argument.lowercased() }) else { return nil }
        self = algorithm
    }

    public static var allValueStrings: [String] { allCases.map(\.rawValue) }
}

extension KeyStatus: ExpressibleByArgument {}

enum TimeText {
    /// `2026-11-22T02:45:00Z`.
    static func iso8601(_ seconds: Double) -> String {
        var time = time_t(seconds.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec)
    }

    /// "expires in 14 minutes", "expired 3 hours ago", as fits `name`.
    static func relative(_ name: String, at instant: Double, now: Double) -> String {
        let delta = instant - now
        let span = AccessTokenPolicy.describe(delta)
        switch (name, delta >= 0) {
        case ("exp", true): return "expires in \(span)"
        case ("exp", false): return "expired \(span) ago"
        case ("nbf", true): return "not valid for another \(span)"
        case ("nbf", false): return "valid since \(span) ago"
        case ("iat", true): return "issued \(span) in the future"
        default: return "issued \(span) ago"
        }
    }
}

/// Loads keys for verification from `--keys DIR` or `--jwks FILE`.
enum KeySource {
    static func load(keysDirectory: String?, jwksFile: String?) throws -> KeySet {
        switch (keysDirectory, jwksFile) {
        case (nil, nil):
            throw CLIError("say where the keys are: --keys DIR or --jwks FILE")
        case (.some, .some):
            throw CLIError("give either --keys or --jwks, not both")
        case (let directory?, nil):
            guard FileManager.default.fileExists(atPath: directory + "/keyring.json") else {
                let files = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".pem") || $0.hasSuffix(".jwk") }.sorted()
                if let file = files.first {
                    throw CLIError(
                        "\(directory) has key files but no keyring.json; add each with `portcullis keys import \(directory)/\(file) --alg ALG --dir \(directory)` (it writes keyring.json)")
                }
                throw CLIError("\(directory) has no keyring.json; create a key with `portcullis keys generate --alg ES256 --dir \(directory)`, or bring one with `portcullis keys import FILE --alg ALG --dir \(directory)`")
            }
            let loaded = try KeyDirectory(path: directory).load()
            loaded.warnings.forEach(Terminal.warning)
            return loaded.keySet
        case (nil, let file?):
            return try KeySet.fromJWKS(try readInput(file, what: "the JWKS file", limit: 1 << 20))
        }
    }

    /// The whole of `path`, read as a stream: a regular file, or a pipe such as `<(curl ...)`'s
    /// `/dev/fd/63` (which has no size to read up to). At most `limit` bytes.
    static func readInput(_ path: String, what: String, limit: Int) throws -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw CLIError("cannot read \(what) \(path): it is missing or unreadable") }
        defer { try? handle.close() }
        var bytes: [UInt8] = []
        while let chunk = try handle.read(upToCount: 64 << 10), !chunk.isEmpty {
            bytes.append(contentsOf: chunk)
            guard bytes.count <= limit else { throw CLIError("\(what) \(path) is larger than \(limit >> 10) KiB; is it the right file?") }
        }
        return bytes
    }
}
