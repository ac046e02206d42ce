// libFuzzer target: text -> SessionID.problem(with:). Oracle: a value is
// well formed exactly when there is no problem with it.
import RuntimeAPI

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSessionID(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let problem = SessionID.problem(with: text)
    if (problem == nil) != SessionID.isWellFormed(text) { fatalError("problem(with:) and isWellFormed disagree") }
    if problem == nil, text.utf8.count != 26 { fatalError("a session id of the wrong length was accepted") }
    _ = problem?.message
    return 0
}
