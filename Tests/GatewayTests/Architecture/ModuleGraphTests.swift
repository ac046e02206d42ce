import Foundation
import Testing

/// The picture of the modules in docs/ARCHITECTURE.md is Package.swift's, and every module has its row.
///
/// The picture is drawn from the targets' own dependencies in Package.swift (the edges no other path
/// implies, so it stays readable); run with `PORTCULLIS_UPDATE_DOCS=1` to write it after changing them.
@Suite("docs/ARCHITECTURE.md and Package.swift")
struct ModuleGraphTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let begin = "<!-- module-graph: generated from Package.swift by ModuleGraphTests -->"
    static let end = "<!-- module-graph end -->"

    @Test("the module picture in docs/ARCHITECTURE.md is the one Package.swift's dependencies draw (PORTCULLIS_UPDATE_DOCS=1 writes it)")
    func pictureMatchesPackage() throws {
        let modules = try PackageTargets.read(Self.root.appendingPathComponent("Package.swift"))
        let picture = modules.mermaid()
        let documentURL = Self.root.appendingPathComponent("docs/ARCHITECTURE.md")
        let document = try String(contentsOf: documentURL, encoding: .utf8)
        let start = try #require(document.range(of: Self.begin), "docs/ARCHITECTURE.md has no line \(Self.begin)")
        let stop = try #require(document.range(of: Self.end, range: start.upperBound..<document.endIndex), "no \(Self.end) after it")
        let written = String(document[start.upperBound..<stop.lowerBound])
        if written != "\n" + picture {
            if ProcessInfo.processInfo.environment["PORTCULLIS_UPDATE_DOCS"] == "1" {
                try document.replacingCharacters(in: start.upperBound..<stop.lowerBound, with: "\n" + picture)
                    .write(to: documentURL, atomically: true, encoding: .utf8)
            } else {
                Issue.record("docs/ARCHITECTURE.md's module picture differs from Package.swift's; run PORTCULLIS_UPDATE_DOCS=1 swift test --filter ModuleGraphTests. It should read:\n\(picture)")
            }
        }
    }

    @Test("every module in Package.swift has its row in docs/ARCHITECTURE.md's table, naming each module it depends on")
    func everyModuleHasItsRow() throws {
        let modules = try PackageTargets.read(Self.root.appendingPathComponent("Package.swift"))
        let document = try String(contentsOf: Self.root.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
        for (name, dependencies) in modules.sources {
            let row = document.split(separator: "\n").first { $0.hasPrefix("| `\(name)` |") }
            guard let row else {
                Issue.record("docs/ARCHITECTURE.md has no row | `\(name)` | for the module \(name)")
                continue
            }
            let dependsOn = row.split(separator: "|").last.map(String.init) ?? ""
            for dependency in dependencies where !dependsOn.contains(dependency) && !dependsOn.contains("all of the above") && !dependsOn.contains(" all ") {
                Issue.record("\(name)'s row does not name \(dependency), which Package.swift says it depends on")
            }
        }
    }

    @Test("the reading of Package.swift finds the targets and only their own dependencies")
    func readingFindsTargets() throws {
        let modules = try PackageTargets.read(Self.root.appendingPathComponent("Package.swift"))
        #expect(modules.sources["JOSE"] == ["CLibCrypto", "CLibCryptoSetup"])
        #expect(modules.sources["DataPlane"]?.contains("EdgeHTTP") == true)
        #expect(modules.sources["DataPlane"]?.contains("Gateway") == false, "the data plane sits beneath the gateway")
        #expect(modules.sources["GatewayTests"] == nil, "test targets are not modules of the product")
        let picture = modules.mermaid()
        #expect(picture.contains("DataPlane --> RuntimeAccess"))
        #expect(!picture.contains("Gateway --> EdgeHTTP"), "an edge another path implies is left out: \(picture)")
    }
}

/// The targets of Package.swift and the targets each depends on, read from its text.
///
/// Reads the manifest's own layout: each `.target(`, `.executableTarget(` or `.systemLibrary(`
/// with `name: "..."` and quoted target names in its `dependencies` (products are skipped).
struct PackageTargets {
    /// Source modules (no tests, probes or benchmarks) and the targets each depends on, as written.
    var sources: [String: [String]] = [:]

    static func read(_ url: URL) throws -> PackageTargets {
        let text = try String(contentsOf: url, encoding: .utf8)
        var result = PackageTargets()
        var all: [(name: String, dependencies: [String], path: String?, kind: String)] = []
        let starts = [".target(", ".executableTarget(", ".systemLibrary(", ".testTarget("]
        var blocks: [(kind: String, body: Substring)] = []
        var rest = text[...]
        while let next = starts.compactMap({ start in rest.range(of: start).map { (start, $0) } }).min(by: { $0.1.lowerBound < $1.1.lowerBound }) {
            let after = rest[next.1.upperBound...]
            let following = starts.compactMap { after.range(of: $0)?.lowerBound }.min() ?? after.endIndex
            blocks.append((next.0, after[..<following]))
            rest = after[following...]
        }
        for (kind, body) in blocks {
            let lines = body.split(separator: "\n")
            guard let name = lines.lazy.compactMap({ Self.quoted(after: "name:", in: $0) }).first else { continue }
            let path = lines.lazy.compactMap { Self.quoted(after: "path:", in: $0) }.first
            var dependencies: [String] = []
            for line in lines where !line.contains(".product(") && !line.contains("name:") && !line.contains("path:") {
                var remaining = line[...]
                while let open = remaining.firstIndex(of: "\""), let close = remaining[remaining.index(after: open)...].firstIndex(of: "\"") {
                    dependencies.append(String(remaining[remaining.index(after: open)..<close]))
                    remaining = remaining[remaining.index(after: close)...]
                }
            }
            all.append((name, dependencies, path, kind))
        }
        let names = Set(all.map(\.name))
        for target in all where target.kind != ".testTarget(" && !(target.path ?? "Sources").hasPrefix("Tests") && !(target.path ?? "").hasPrefix("Benchmarks") {
            result.sources[target.name] = target.dependencies.filter { names.contains($0) }
        }
        return result
    }

    private static func quoted(after key: String, in line: Substring) -> String? {
        guard let keyRange = line.range(of: key) else { return nil }
        let tail = line[keyRange.upperBound...]
        guard let open = tail.firstIndex(of: "\""), let close = tail[tail.index(after: open)...].firstIndex(of: "\"") else { return nil }
        return String(tail[tail.index(after: open)..<close])
    }

    /// Every module a module reaches through its dependencies.
    func reach(from name: String) -> Set<String> {
        var seen = Set<String>()
        var stack = sources[name] ?? []
        while let next = stack.popLast() {
            if seen.insert(next).inserted { stack.append(contentsOf: sources[next] ?? []) }
        }
        return seen
    }

    /// A Mermaid flowchart of the dependencies, each module above what it depends on, leaving out
    /// an edge when another path implies it (a transitive reduction).
    func mermaid() -> String {
        var lines = ["```mermaid", "flowchart TD"]
        for name in sources.keys.sorted() {
            let direct = Set(sources[name] ?? [])
            let implied = direct.reduce(into: Set<String>()) { implied, dependency in implied.formUnion(reach(from: dependency)) }
            for dependency in direct.subtracting(implied).sorted() {
                lines.append("    \(name) --> \(dependency)")
            }
        }
        lines.append("```")
        return lines.joined(separator: "\n") + "\n"
    }
}
