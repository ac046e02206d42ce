// libFuzzer target: text -> Base64URL.decode. Oracle: what decodes is canonical,
// so encoding the bytes gives back exactly the input.
import JOSE

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBase64URL(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    if let bytes = Base64URL.decode(text), Base64URL.encode(bytes) != text {
        fatalError("a non-canonical base64url string was accepted")
    }
    return 0
}
