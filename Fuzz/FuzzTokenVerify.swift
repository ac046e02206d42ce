// libFuzzer target: bytes -> the full access-token verification against a fixed key ring and policy.
// Built by scripts/fuzz.sh with `swiftc -sanitize=fuzzer,address`, linked against the JOSE module.
//
// Two readings of each input: as a token, verified for crashes and hangs; and as the claims of a
// token signed with the key ring's key under the signer's header, verified by a verifier that
// knows that header (`KnownHeaders`) and by a new one. Oracle: both give the same answer.
import JOSE

let fuzzHMAC = try! JWSKey(hmacSecret: [UInt8](repeating: 0x42, count: 32), algorithm: .hs256, kid: "hs")
let fuzzKeys = try! KeySet([.init(key: fuzzHMAC, status: .active)])
let fuzzPolicy = AccessTokenPolicy.gateway(issuer: "https://issuer.example", audience: "fuzz")
let fuzzHeader: JSONObject = ["alg": "HS256", "typ": "at+jwt", "kid": "hs"]
let fuzzVerifier: AccessTokenVerifier = {
    let verifier = AccessTokenVerifier(keys: fuzzKeys, policy: fuzzPolicy, clock: FixedClock(1_800_000_000))
    // One token that verifies, so that the signer's header is known from the first input on.
    let claims: JSONValue = [
        "iss": "https://issuer.example", "sub": "u", "aud": "fuzz", "exp": 1_800_000_600, "iat": 1_800_000_000, "nbf": 1_800_000_000,
        "jti": "j", "client_id": "c", "tenant_id": "t",
    ]
    _ = try! verifier.verify(try! JWSCompact.sign(header: fuzzHeader, payload: JSONWriter.bytes(claims), key: fuzzHMAC))
    return verifier
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTokenVerify(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let token = String(decoding: bytes, as: UTF8.self)
    _ = try? fuzzVerifier.verify(token)
    guard let signed = try? JWSCompact.sign(header: fuzzHeader, payload: bytes, key: fuzzHMAC) else { return 0 }
    let fresh = AccessTokenVerifier(keys: fuzzKeys, policy: fuzzPolicy, clock: FixedClock(1_800_000_000))
    func answer(_ verifier: AccessTokenVerifier) -> String {
        do { return "verified \(try verifier.verify(signed).claims)" } catch { return "refused \(error.reason) \(error.message)" }
    }
    if answer(fuzzVerifier) != answer(fresh) { fatalError("a known header changed a verification's answer") }
    return 0
}
