// libFuzzer target: bytes -> the full access-token verification against a fixed key ring and policy.
// Built by scripts/fuzz.sh with `swiftc -sanitize=fuzzer,address`, linked against the JOSE module.
import JOSE

let fuzzKeys: KeySet = {
    let hmac = try! JWSKey(hmacSecret: [UInt8](repeating: 0x42, count: 32), algorithm: .hs256, kid: "hs")
    return try! KeySet([.init(key: hmac, status: .active)])
}()
let fuzzVerifier = AccessTokenVerifier(
    keys: fuzzKeys, policy: .gateway(issuer: "https://issuer.example", audience: "fuzz"), clock: FixedClock(1_800_000_000))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTokenVerify(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let token = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? fuzzVerifier.verify(token)
    return 0
}
