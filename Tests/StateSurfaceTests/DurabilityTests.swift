import Foundation
import PortcullisTestSupport
import StateSurface
import Testing

@Suite("Durability across processes")
struct DurabilityTests {
    @Test("every session a writer reported as committed is there after the writer is killed with SIGKILL")
    func killNine() async throws {
        let temp = TemporaryDatabase()
        let writer = try ChildProcess(PortcullisBinary.probesPath, ["state-writer", "--database", temp.path], separateErrors: true)
        defer { writer.remove() }

        // Read reported ids (one per line, each written after its commit) until enough are in, then kill mid-run.
        var reported: [String] = []
        let deadline = Date().addingTimeInterval(TimeBounds.seconds(30))
        while Date() < deadline, writer.isRunning {
            let lines = writer.output.split(separator: "\n", omittingEmptySubsequences: false)
            reported = lines.dropLast().map(String.init)  // the last piece may be a line still being written
            if reported.count >= 300 { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        writer.kill9()
        #expect(writer.exitStatus == 128 + SIGKILL, "the writer was still running when it was killed")
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
        let (status, text) = try ChildProcess.run(PortcullisBinary.probesPath, ["state-writer", "--database", temp.path, "--count", "3"])
        #expect(status == 0)
        let ids = text.split(separator: "\n").map(String.init)
        #expect(ids.count == 3)
        let state = try SQLiteStateSurface(path: temp.path)
        for id in ids { #expect(try await state.session(id: id)?.state == .anonymous) }
    }
}
