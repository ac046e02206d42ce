// libFuzzer target: text -> the agent channel's frame parser (the same code the Runtime runs).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAgentFrame(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    do {
        if case .intent(let requestID, let intent) = try AgentFrame.parse(text) {
            if requestID.isEmpty || requestID.utf8.count > 128 { fatalError("a bad request_id passed") }
            _ = intent.payload
        }
    } catch {
        _ = error.message
    }
    return 0
}
