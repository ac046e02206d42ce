import Foundation
import Gateway
import Testing

@Suite("The browser client and the demo page, served by the gateway")
struct BrowserClientRoutesTests {
    /// The package's `clients/` folder (the tests run from the package root).
    static let clients = FileManager.default.currentDirectoryPath + "/clients"

    @Test("GET /client/portcullis.js is the module file, as JavaScript with a strong ETag; If-None-Match with it is a 304 without a body")
    func clientModule() async throws {
        let fixture = try await GatewayFixture { $0.clientDirectory = Self.clients }
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

    @Test("/demo/ is served on a loopback listener by default, with a content security policy; gateway.demo off removes it")
    func demoPage() async throws {
        let fixture = try await GatewayFixture { $0.clientDirectory = Self.clients }
        let page = try await fixture.send(.GET, "/demo/")
        #expect(page.status == 200)
        #expect(page.headers.first(name: "Content-Type") == "text/html; charset=utf-8")
        #expect(page.raw.contains("import { PortcullisClient } from \"/client/portcullis.js\""))
        #expect(page.headers.first(name: "Content-Security-Policy")?.contains("default-src 'self'") == true)
        try await fixture.stop()

        let off = try await GatewayFixture { $0.clientDirectory = Self.clients; $0.demo = .off }
        let missing = try await off.send(.GET, "/demo/")
        #expect(missing.status == 404)
        #expect(missing.error == "not_found")
        #expect(try await off.send(.GET, "/client/portcullis.js").status == 200, "the client module is served whatever gateway.demo says")
        try await off.stop()
    }

    @Test("without the files, both answer a JSON 404 naming gateway.client_directory")
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
