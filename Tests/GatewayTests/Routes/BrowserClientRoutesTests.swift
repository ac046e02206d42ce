import Foundation
import Gateway
import Testing

@Suite("The browser client and the demo page, served by the gateway")
struct BrowserClientRoutesTests {
    /// The repository's `clients/` folder.
    static let clients = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("clients").path

    @Test("GET /client/portcullis.js is clients/js/portcullis.js as built in, as JavaScript with a strong ETag; If-None-Match with it is a 304 without a body (run scripts/embed-files.sh after editing it)")
    func clientModule() async throws {
        let fixture = try await GatewayFixture()
        let file = try String(contentsOfFile: Self.clients + "/js/portcullis.js", encoding: .utf8)
        let answer = try await fixture.send(.GET, "/client/portcullis.js")
        #expect(answer.status == 200)
        #expect(answer.raw == file)
        #expect(answer.headers.first(name: "Content-Type") == "text/javascript; charset=utf-8")
        #expect(answer.headers.first(name: "X-Content-Type-Options") == "nosniff")
        let etag = try #require(answer.headers.first(name: "ETag"))
        #expect(etag.hasPrefix("\"sha256-") && etag.hasSuffix("\""))
        let again = try await fixture.send(.GET, "/client/portcullis.js", headers: [("If-None-Match", etag)])
        #expect(again.status == 304)
        #expect(again.raw.isEmpty)
        let stale = try await fixture.send(.GET, "/client/portcullis.js", headers: [("If-None-Match", "\"sha256-old\"")])
        #expect(stale.status == 200)
        try await fixture.stop()
    }

    @Test("/demo/ is clients/demo/index.html as built in, served on a loopback listener by default with a content security policy; gateway.demo off removes it (run scripts/embed-files.sh after editing it)")
    func demoPage() async throws {
        let fixture = try await GatewayFixture()
        let page = try await fixture.send(.GET, "/demo/")
        #expect(page.status == 200)
        #expect(page.raw == (try String(contentsOfFile: Self.clients + "/demo/index.html", encoding: .utf8)), "the built-in demo page differs from clients/demo/index.html: run scripts/embed-files.sh")
        #expect(page.headers.first(name: "Content-Type") == "text/html; charset=utf-8")
        #expect(page.raw.contains("import { PortcullisClient } from \"/client/portcullis.js\""))
        #expect(page.headers.first(name: "Content-Security-Policy")?.contains("default-src 'self'") == true)
        try await fixture.stop()

        let off = try await GatewayFixture { $0.demo = .off }
        let missing = try await off.send(.GET, "/demo/")
        #expect(missing.status == 404)
        #expect(missing.error == "not_found")
        #expect(try await off.send(.GET, "/client/portcullis.js").status == 200, "the client module is served whatever gateway.demo says")
        try await off.stop()
    }

    @Test("gateway.client_directory serves a modified client and demo page from that directory instead of the built-in ones")
    func directoryOverride() async throws {
        let directory = NSTemporaryDirectory() + "portcullis-clients-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory + "/js", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory + "/demo", withIntermediateDirectories: true)
        try "export const modified = true;\n".write(toFile: directory + "/js/portcullis.js", atomically: true, encoding: .utf8)
        try "<!doctype html><title>modified</title>\n".write(toFile: directory + "/demo/index.html", atomically: true, encoding: .utf8)
        let fixture = try await GatewayFixture { $0.clientDirectory = directory }
        let client = try await fixture.send(.GET, "/client/portcullis.js")
        #expect(client.status == 200)
        #expect(client.raw == "export const modified = true;\n")
        let builtIn = try await GatewayFixture()
        #expect(client.headers.first(name: "ETag") != (try await builtIn.send(.GET, "/client/portcullis.js")).headers.first(name: "ETag"), "another file, another ETag")
        try await builtIn.stop()
        let page = try await fixture.send(.GET, "/demo/")
        #expect(page.raw == "<!doctype html><title>modified</title>\n")
        #expect(page.headers.first(name: "Content-Security-Policy") != nil)
        try await fixture.stop()
    }

    @Test("with gateway.client_directory set and the files missing there, both answer a JSON 404 naming gateway.client_directory")
    func missingFiles() async throws {
        let empty = NSTemporaryDirectory() + "portcullis-no-clients-" + UUID().uuidString
        let fixture = try await GatewayFixture { $0.clientDirectory = empty }
        for path in ["/client/portcullis.js", "/demo/"] {
            let answer = try await fixture.send(.GET, path)
            #expect(answer.status == 404, "\(path)")
            #expect(answer.error == "not_found")
            #expect(answer["message"]?.contains("gateway.client_directory") == true, "\(answer.raw)")
        }
        try await fixture.stop()
    }
}
