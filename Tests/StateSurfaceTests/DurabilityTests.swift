import Foundation
import PortcullisTestSupport
import StateSurface
import Testing

@Suite("Durability across processes")
struct DurabilityTests {
    @Test("every session a writer reported as committed is there after the writer is killed with SIGKILL")
    func killNine() async throws {
        let temp = TemporaryDatabase()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: PortcullisBinary.probesPath)
        process.arguments = ["state-writer", "--database", temp.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = Pipe()
        try process.run()

        // Read reported ids until enough have been committed, then kill mid-run.
        var reported: [String] = []
        var pending = Data()
        let deadline = Date().addingTimeInterval(30)
        let handle = output.fileHandleForReading
        while reported.count < 300, Date() < deadline {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            pending.append(chunk)
            while let newline = pending.firstIndex(of: 0x0A) {
                reported.append(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                pending.removeSubrange(pending.startIndex...newline)
            }
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(reported.count >= 300, "the writer reported only \(reported.count) sessions")

        let state = try SQLiteStateSurface(path: temp.path)
        #expect(try await state.integrityCheck() == "ok")
        var missing = 0
        for id in reported where try await state.session(id: id) == nil { missing += 1 }
        #expect(missing == 0, "\(missing) of \(reported.count) acknowledged sessions were lost")
    }

    @Test("sessions written by one process are read by the next")
    func crossProcessRestart() async throws {
        let temp = TemporaryDatabase()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: PortcullisBinary.probesPath)
        process.arguments = ["state-writer", "--database", temp.path, "--count", "3"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let ids = text.split(separator: "\n").map(String.init)
        #expect(ids.count == 3)
        let state = try SQLiteStateSurface(path: temp.path)
        for id in ids { #expect(try await state.session(id: id)?.state == .anonymous) }
    }
}
