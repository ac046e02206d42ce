import ConfigurationReading
import Foundation
import Testing

/// The documents users read: short where they must be, true to the files the tests run, and
/// self-contained (nothing outside the repository, no issue numbers).
@Suite("User documents: the README, the guides and the reference")
struct UserDocsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    static func read(_ path: String) throws -> String { try String(contentsOfFile: root + "/" + path, encoding: .utf8) }

    /// Every document a user is sent to: the README, the guides, the reference and the explanation.
    static func userDocuments() throws -> [String] {
        let guides = try FileManager.default.contentsOfDirectory(atPath: root + "/docs/guides").filter { $0.hasSuffix(".md") }.map { "docs/guides/" + $0 }
        return ["README.md", "docs/GATEWAY.md", "docs/TOKENS.md", "docs/RUNTIME.md", "docs/AUDIT.md", "docs/ARCHITECTURE.md", "docs/HARDENING.md", "clients/js/README.md"]
            + guides.sorted()
    }

    @Test("the forward-auth guide holds config/forward-auth/nginx.conf and Caddyfile word for word (the files scripts/forward-auth.sh runs)")
    func forwardAuthGuideHoldsTheTestedFiles() throws {
        let guide = try Self.read("docs/guides/forward-auth.md")
        for name in ["nginx.conf", "Caddyfile"] {
            let text = try Self.read("config/forward-auth/" + name)
            #expect(!text.isEmpty && guide.contains(text.trimmingCharacters(in: .newlines)), "the guide's copy of \(name) differs from the file the tests run")
        }
    }

    @Test("the README is for users and short: at most 200 lines, install and a quickstart before anything else, the maintainers' material in CONTRIBUTING.md")
    func readmeIsShort() throws {
        let readme = try Self.read("README.md")
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count <= 200, "README.md has \(lines.count) lines")
        let headings = lines.filter { $0.hasPrefix("## ") }.map { String($0.dropFirst(3)) }
        #expect(headings.prefix(2) == ["Install", "Quickstart: your service behind Portcullis"], "\(headings)")
        for maintainers in ["AddressSanitizer", "fuzz", "bench-proxy", "Updating the dependencies"] {
            #expect(!readme.contains(maintainers), "README mentions \(maintainers): maintainers' material belongs in CONTRIBUTING.md")
        }
        #expect(readme.contains("swift run portcullis serve") && readme.contains("scripts/test.sh"), "the two commands from source stay")
        let contributing = try Self.read("CONTRIBUTING.md")
        #expect(contributing.contains("scripts/test.sh") && contributing.contains("AddressSanitizer") && contributing.contains("Updating the dependencies"))
    }

    @Test("no user document links outside the repository's own files or names an issue number, and every relative link it makes leads to a file that exists")
    func selfContained() throws {
        let issueNumber = /[Ii]ssue #?[0-9]+|issues\/[0-9]+/
        for path in try Self.userDocuments() {
            let text = try Self.read(path)
            #expect(!text.contains("../shared"), "\(path) links outside the repository")
            #expect(text.firstMatch(of: issueNumber) == nil, "\(path) names an issue: \(String(describing: text.firstMatch(of: issueNumber)?.output))")
            let directory = (path as NSString).deletingLastPathComponent
            for match in text.matches(of: /\]\(([^)#\s]+)(#[^)]*)?\)/) {
                let target = String(match.output.1)
                guard !target.contains("://"), !target.hasPrefix("mailto:") else { continue }
                let resolved = ((Self.root + "/" + directory) as NSString).appendingPathComponent(target)
                #expect(FileManager.default.fileExists(atPath: (resolved as NSString).standardizingPath), "\(path) links to \(target), which does not exist")
            }
        }
    }

    @Test("the reference names every configuration key the code reads (GATEWAY.md, or RUNTIME.md for the Runtime's), so that it cannot drift from config/portcullis.yaml and the code")
    func referenceNamesEveryKey() throws {
        let values = ConfigurationValues.defaultsOnly()
        _ = try ConfigurationDefaultsTests.readAll(values)
        let reference = try Self.read("docs/GATEWAY.md") + Self.read("docs/RUNTIME.md")
        var missing: [String] = []
        for key in values.readKeys.sorted() {
            // A rate limit's two numbers are documented as the limit's pair ("60/min, burst 30").
            let named = key.hasPrefix("rate_limits.") ? key.split(separator: ".").prefix(2).joined(separator: ".") : key
            if !reference.contains("`" + named + "`") { missing.append(key) }
        }
        #expect(missing.isEmpty, "keys the code reads that the reference does not name: \(missing)")
    }
}
