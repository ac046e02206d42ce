// libFuzzer target: bytes -> StrictJSONReader. Oracle: whatever parses must
// survive a write/re-read round trip unchanged.
import JOSE

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzStrictJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let object = try? StrictJSONReader().parseObject(bytes) else { return 0 }
    let written = JSONWriter.bytes(.object(object))
    guard let again = try? StrictJSONReader().parseObject(written), again == object else {
        fatalError("round trip changed a parsed object")
    }
    return 0
}
