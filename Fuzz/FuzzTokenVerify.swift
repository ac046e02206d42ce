// libFuzzer target: bytes -> the full access-token verification against a fixed key ring and policy.
// Built by scripts/fuzz.sh with `swiftc -sanitize=fuzzer,address`, linked against the JOSE module.
//
// Two readings of each input: as a token, verified for crashes and hangs; and as a token made from
// it (its first byte picks one of five signed headers, its second may spoil one character of the
// payload or signature, the rest is the claims), verified by a verifier that knows four of the
// headers (`KnownHeaders`) and by a new one. Oracle: both give the same answer.
import JOSE

let fuzzHMAC = try! JWSKey(hmacSecret: [UInt8](repeating: 0x42, count: 32), algorithm: .hs256, kid: "hs")
let fuzzKeys = try! KeySet([.init(key: fuzzHMAC, status: .active)])
let fuzzPolicy = AccessTokenPolicy.gateway(issuer: "https://issuer.example", audience: "fuzz")
let fuzzClock = FixedClock(1_800_000_000)
/// Headers as written (escapes, extra members, a name with x5u's hash, a refused type).
let fuzzHeaders = [
    #"{"alg":"HS256","typ":"at+jwt","kid":"hs"}"#, #"{"alg":"HS256","t\u0079p":"at+jwt","kid":"hs"}"#,
    #"{"alg":"HS256","typ":"at+jwt","kid":"hs","x":[1,{"y":null}]}"#, #"{"alg":"HS256","typ":"at+jwt","kid":"hs","mzeigca":"u"}"#,
    #"{"alg":"HS256","typ":"JWT","kid":"hs"}"#,
]

func fuzzToken(header: String, claims: [UInt8]) -> String {
    let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(claims)
    return input + "." + Base64URL.encode(try! fuzzHMAC.sign(Array(input.utf8)))
}

let fuzzVerifier: AccessTokenVerifier = {
    let verifier = AccessTokenVerifier(keys: fuzzKeys, policy: fuzzPolicy, clock: fuzzClock)
    let claims = Array(
        #"{"iss":"https://issuer.example","sub":"u","aud":"fuzz","exp":1800000600,"iat":1800000000,"nbf":1800000000,"jti":"j","client_id":"c","tenant_id":"t"}"#.utf8)
    // The four headers that pass the header rules become known before the first input.
    for header in fuzzHeaders.prefix(4) { _ = try! verifier.verify(fuzzToken(header: header, claims: claims)) }
    return verifier
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTokenVerify(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? fuzzVerifier.verify(String(decoding: bytes, as: UTF8.self))
    guard bytes.count >= 3 else { return 0 }
    var token = Array(fuzzToken(header: fuzzHeaders[Int(bytes[0]) % fuzzHeaders.count], claims: Array(bytes[3...])).utf8)
    let dots = token.indices.filter { token[$0] == UInt8(ascii: ".") }
    let spoiled: Range<Int>? =
        switch bytes[1] % 4 {
        case 0: (dots[0] + 1)..<dots[1]  // a payload character
        case 1: (dots[1] + 1)..<token.count  // a signature character
        default: nil
        }
    if let spoiled, !spoiled.isEmpty {
        let at = spoiled.lowerBound + Int(bytes[2]) % spoiled.count
        token[at] = token[at] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
    }
    let text = String(decoding: token, as: UTF8.self)
    let fresh = AccessTokenVerifier(keys: fuzzKeys, policy: fuzzPolicy, clock: fuzzClock)
    func answer(_ verifier: AccessTokenVerifier) -> String {
        do { return "verified \(try verifier.verify(text).claims)" } catch { return "refused \(error.reason) \(error.message)" }
    }
    if answer(fuzzVerifier) != answer(fresh) { fatalError("a known header changed a verification's answer") }
    return 0
}
