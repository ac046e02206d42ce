// libFuzzer target: text -> FormEncoding.fields (the sign-in callback's query and the
// back-channel logout's form). Oracle: what is read is a dictionary of UTF-8 names and values
// that, encoded again, reads back the same; a name given twice is never read.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFormFields(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let fields = FormEncoding.fields(Substring(text)) else { return 0 }
    let again = fields.map { FormEncoding.encode($0.key) + "=" + FormEncoding.encode($0.value) }.joined(separator: "&")
    guard let reread = FormEncoding.fields(Substring(again)), reread == fields else {
        fatalError("fields read from a form do not read back the same once encoded again")
    }
    return 0
}
