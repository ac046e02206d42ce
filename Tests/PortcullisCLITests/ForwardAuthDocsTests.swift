import Foundation
import Testing

/// The README shows the forward-auth configurations the suite runs (scripts/forward-auth.sh).
@Suite("README: the forward-auth configurations are the tested ones")
struct ForwardAuthDocsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    @Test("README holds config/forward-auth/nginx.conf and Caddyfile word for word")
    func readmeHoldsTheTestedFiles() throws {
        let readme = try String(contentsOfFile: Self.root + "/README.md", encoding: .utf8)
        for name in ["nginx.conf", "Caddyfile"] {
            let text = try String(contentsOfFile: Self.root + "/config/forward-auth/" + name, encoding: .utf8)
            #expect(!text.isEmpty && readme.contains(text.trimmingCharacters(in: .newlines)), "README's copy of \(name) differs from the file the tests run")
        }
    }
}
