import Foundation
import Gateway
import Hummingbird
import Testing

/// docs/openapi.yaml is the public contract: it lists exactly the routes the gateway
/// serves, and the gateway serves exactly that document.
@Suite("docs/openapi.yaml and the gateway's routes")
struct OpenAPIDocumentTests {
    static let documentPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/openapi.yaml").path

    /// `METHOD /path` for every operation: the path keys under `paths:` (two spaces) and
    /// their method keys (four spaces), as the document is written.
    static func operations(in yaml: String) -> Set<String> {
        var result = Set<String>()
        var path: String? = nil
        var inPaths = false
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" ") { inPaths = line == "paths:"; path = nil; continue }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), !line.hasPrefix("   "), line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
            } else if let path, line.hasPrefix("    "), !line.hasPrefix("     "),
                let method = ["get", "put", "post", "patch", "delete", "head", "options"].first(where: { line == "    \($0):" })
            {
                result.insert("\(method.uppercased()) \(Self.normalized(path))")
            }
        }
        return result
    }

    /// Hummingbird prints `/demo/` as `/demo`: compare without a trailing slash.
    static func normalized(_ path: String) -> String {
        path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
    }

    @Test("every route the gateway serves is in the document, and every operation in the document is served")
    func routesMatchDocument() async throws {
        let fixture = try await GatewayFixture()
        let router = GatewayServer.makeRouter(services: fixture.server.services)
        let served = Set(router.routes.map { route in
            let path = route.path.description.split(separator: "/", omittingEmptySubsequences: false).map { segment in
                // `**` (the rest of the path) is documented as one parameter, `{resource_path}`.
                segment == "**" ? "{resource_path}" : segment.hasPrefix(":") ? "{\(segment.dropFirst())}" : String(segment)
            }.joined(separator: "/")
            return "\(route.method.rawValue) \(Self.normalized(path))"
        })
        let documented = Self.operations(in: try String(contentsOfFile: Self.documentPath, encoding: .utf8))
        #expect(served.count > 10 && documented.count > 10)
        #expect(served.subtracting(documented).isEmpty, "served but not in docs/openapi.yaml: \(served.subtracting(documented).sorted())")
        #expect(documented.subtracting(served).isEmpty, "in docs/openapi.yaml but not served: \(documented.subtracting(served).sorted())")
        try await fixture.stop()
    }

    @Test("the gateway serves docs/openapi.yaml as it is at /.well-known/openapi.yaml (run scripts/embed-files.sh after editing it)")
    func servedAsWritten() async throws {
        let fixture = try await GatewayFixture()
        let answer = try await fixture.send(.GET, "/.well-known/openapi.yaml")
        #expect(answer.status == 200)
        #expect(answer.headers.first(name: "Content-Type")?.hasPrefix("application/yaml") == true)
        let written = try String(contentsOfFile: Self.documentPath, encoding: .utf8)
        #expect(answer.raw == written, "the embedded document differs from docs/openapi.yaml: run scripts/embed-files.sh")
        try await fixture.stop()
    }

    @Test("the document has a strong ETag: If-None-Match with it (or *, spaced or not) is a 304 without the body; another version gets the document")
    func revalidated() async throws {
        let fixture = try await GatewayFixture()
        let first = try await fixture.send(.GET, "/.well-known/openapi.yaml")
        let etag = try #require(first.headers.first(name: "ETag"))
        #expect(etag.hasPrefix("\"sha256-") && etag.hasSuffix("\""))
        #expect(first.headers.first(name: "Cache-Control") == "public, max-age=300")
        for match in [etag, " \(etag) ", "\"other\", \(etag)", "*", " *"] {
            let again = try await fixture.send(.GET, "/.well-known/openapi.yaml", headers: [("If-None-Match", match)])
            #expect(again.status == 304, "If-None-Match: \(match)")
            #expect(again.raw.isEmpty)
            #expect(again.headers.first(name: "ETag") == etag)
        }
        let stale = try await fixture.send(.GET, "/.well-known/openapi.yaml", headers: [("If-None-Match", "\"sha256-AAAAAAAAAAAAAAAAAAAAAA\"")])
        #expect(stale.status == 200 && stale.raw == first.raw)
        try await fixture.stop()
    }
}
