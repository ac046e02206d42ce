import Foundation
import Testing

@testable import JOSE

/// Where the shared conformance vectors are: `PORTCULLIS_VECTORS`, set by `.ci/run`.
enum Vectors {
    static let root: String? = {
        guard let path = ProcessInfo.processInfo.environment["PORTCULLIS_VECTORS"], !path.isEmpty else { return nil }
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }()

    static let skipMessage = "PORTCULLIS_VECTORS is not set: conformance vectors skipped (.ci/run sets it to ../shared/vectors)"

    /// True when the vectors are there; otherwise prints why the test is skipped.
    static var available: Bool {
        if root == nil { print(skipMessage) }
        return root != nil
    }

    /// Loads a JSON file with Foundation's parser, independent of the reader under test.
    static func json(_ relativePath: String) throws -> Any {
        let url = URL(fileURLWithPath: root! + "/" + relativePath)
        return try JSONSerialization.jsonObject(with: Data(contentsOf: url), options: [.fragmentsAllowed])
    }

    static func text(_ relativePath: String) throws -> String {
        try String(contentsOfFile: root! + "/" + relativePath, encoding: .utf8)
    }

    /// Converts a Foundation JSON object into this module's `JSONObject`.
    static func object(_ any: Any) throws -> JSONObject {
        let data = try JSONSerialization.data(withJSONObject: any)
        return try StrictJSONReader().parseObject([UInt8](data))
    }
}

func hex(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(text.utf8.count / 2)
    var iterator = text.utf8.makeIterator()
    while let high = iterator.next(), let low = iterator.next() {
        bytes.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)!)
    }
    return bytes
}

/// Builds compact JWS strings by hand, so tests can forge exactly the token an attacker would.
enum Forge {
    static func b64(_ text: String) -> String { Base64URL.encode(Array(text.utf8)) }

    /// A compact JWS over raw header and payload JSON text, signed by `key` (or with `signature`).
    static func token(header: String, payload: String, key: JWSKey? = nil, signature: [UInt8]? = nil) throws -> String {
        let input = b64(header) + "." + b64(payload)
        let sig = try signature ?? key!.sign(Array(input.utf8))
        return input + "." + Base64URL.encode(sig)
    }

    /// A compact JWS whose signature is an HMAC-SHA256 of the input under `secret`
    /// (at least 32 bytes: public keys in any encoding are longer).
    static func hmacToken(header: String, payload: String, secret: [UInt8]) throws -> String {
        try token(header: header, payload: payload, key: try JWSKey(hmacSecret: secret, algorithm: .hs256, kid: "forge"))
    }
}

/// A ready-made verifier and issuer over one key, at a fixed instant.
struct Fixture {
    static let now: Double = 1_800_000_000
    static let issuer = "https://id.test"
    static let audience = "runtime"

    let key: JWSKey
    let keySet: KeySet
    let verifier: AccessTokenVerifier
    let issuerService: AccessTokenIssuer

    init(_ algorithm: JWSAlgorithm = .es256, kid: String = "k1", policy: AccessTokenPolicy? = nil) throws {
        key = try JWSKey.generate(algorithm: algorithm, kid: kid)
        keySet = try KeySet([.init(key: key, status: .active)])
        verifier = AccessTokenVerifier(keys: keySet, policy: policy ?? .gateway(issuer: Self.issuer, audience: Self.audience), clock: FixedClock(Self.now))
        issuerService = AccessTokenIssuer(keys: keySet, issuer: Self.issuer, audience: Self.audience, clock: FixedClock(Self.now))
    }

    func issue() throws -> String {
        try issuerService.issue(subject: "alice", tenantID: "acme", clientID: "web").token
    }

    /// Claims as the gateway writes them, with overrides (`nil` removes a claim).
    static func claims(_ overrides: [String: String?] = [:]) -> String {
        var members: [(String, String)] = [
            ("iss", "\"\(issuer)\""), ("sub", "\"alice\""), ("aud", "\"\(audience)\""), ("exp", "\(Int(now) + 600)"),
            ("iat", "\(Int(now) - 10)"), ("nbf", "\(Int(now) - 10)"), ("jti", "\"j1\""), ("client_id", "\"web\""), ("tenant_id", "\"acme\""),
        ]
        for (name, value) in overrides {
            if let index = members.firstIndex(where: { $0.0 == name }) {
                if let value { members[index].1 = value } else { members.remove(at: index) }
            } else if let value {
                members.append((name, value))
            }
        }
        return "{" + members.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    func header(alg: String? = nil, extra: String = "") -> String {
        "{\"alg\":\"\(alg ?? key.algorithm.rawValue)\",\"typ\":\"at+jwt\",\"kid\":\"\(key.kid)\"\(extra)}"
    }

    /// Signs arbitrary header and claims text with the fixture key.
    func forge(header: String? = nil, claims: String? = nil) throws -> String {
        try Forge.token(header: header ?? self.header(), payload: claims ?? Self.claims(), key: key)
    }

    /// The reason the verifier gives, or `nil` if it accepts.
    func reason(_ token: String) -> TokenValidationError.Reason? {
        do {
            _ = try verifier.verify(token)
            return nil
        } catch {
            return error.reason
        }
    }
}
