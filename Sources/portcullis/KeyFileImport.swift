import ConfigurationReading
import Foundation
import JOSE

/// Reads a key file for `portcullis keys import`: PEM, JWK or a raw HMAC secret.
///
/// What it refuses, each with the fix: a file other users can read when it holds a
/// secret, a key that does not fit the algorithm (JOSE's `JWSKey` checks type, curve,
/// size and HMAC length), a secret file ending in a newline (the bytes would differ
/// from what other parties use), and a JWK whose kid or alg contradicts the options.
struct KeyFileImport {
    let path: String

    func key(algorithm: JWSAlgorithm, kid: String?) throws -> JWSKey {
        guard var bytes = FileManager.default.contents(atPath: path).map([UInt8].init) else {
            throw CLIError("cannot read \(path)")
        }
        defer { for index in bytes.indices { bytes[index] = 0 } }
        // Only a file of valid UTF-8 is read as PEM or JWK text: `openssl rand 32` writes a
        // `{` first or a newline last one time in 256, and such bytes are a raw secret.
        let text = String(validating: bytes, as: UTF8.self)
        let trimmed = text?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        if let text, trimmed.hasPrefix("-----BEGIN") {
            if trimmed.contains("PRIVATE KEY") { try requirePrivateMode() }
            guard algorithm.family != .hmac else {
                throw CLIError("\(algorithm.rawValue) takes a secret (raw bytes or a JWK with \"kty\":\"oct\"), not a PEM key")
            }
            if trimmed.contains("ENCRYPTED") {
                throw CLIError("\(path) is an encrypted private key; decrypt it first (openssl pkey -in \(path) -out plain.pem) and import that")
            }
            return try JWSKey(pem: text, algorithm: algorithm, kid: kid)
        }
        if trimmed.hasPrefix("{") {
            let object: JSONObject
            do { object = try StrictJSONReader().parseObject(Array(trimmed.utf8)) } catch {
                throw CLIError("\(path) starts like a JWK but is not a strict JSON object: \(error.message)")
            }
            if object["d"] != nil || object["k"] != nil { try requirePrivateMode() }
            let key = try JWSKey(jwk: object, fallbackAlgorithm: algorithm)
            guard key.algorithm == algorithm else {
                throw CLIError("the JWK is for \(key.algorithm.rawValue), not \(algorithm.rawValue); import it with --alg \(key.algorithm.rawValue)")
            }
            if let kid, kid != key.kid {
                throw CLIError("the JWK's kid is \(key.kid), not \(kid); leave out --kid or change the JWK")
            }
            return key
        }
        guard algorithm.family == .hmac else {
            throw CLIError("\(path) is neither a PEM key nor a JWK; \(algorithm.rawValue) needs one of those")
        }
        try requirePrivateMode()
        guard text == nil || bytes.last != 0x0A else {
            throw CLIError(
                "\(path) ends with a newline, which would become part of the secret; write the secret without one (openssl rand 32 > \(path), or printf '%s' SECRET > \(path))")
        }
        return try JWSKey(hmacSecret: bytes, algorithm: algorithm, kid: kid ?? "hs-" + SecureRandom.identifier(bytes: 9))
    }

    /// A file holding a private key or a secret must be readable by its owner alone.
    private func requirePrivateMode() throws {
        if let mode = OwnerOnlyFile.modeOthersCanRead(path) {
            throw CLIError("\(path) holds a private key and other users can read it (mode \(mode)); run chmod 600 \(path) and import again")
        }
    }
}
