import DataPlane
import EdgeHTTP
import EmbeddedAssets
import Foundation
import Hummingbird
import JOSE
import Logging

/// `GET /client/portcullis.js` (the browser client module) and `GET /demo/`
/// (the demo page, served when `gateway.demo` allows it).
///
/// Both are compiled into the binary (`Embedded/`, generated from `clients/`),
/// so the gateway serves them from whatever directory it runs in. With
/// `gateway.client_directory` set, they are read from that directory once, at
/// start-up, instead (a modified client); a file missing there is answered
/// with a JSON 404 that says where it was looked for, and logged once.
struct BrowserClientRoutes: Sendable {
    let client: StaticAsset?
    let demo: StaticAsset?
    /// The override directory; `nil`: the embedded files.
    let directory: String?
    let servesDemo: Bool

    static let clientType = "text/javascript; charset=utf-8"
    static let demoType = "text/html; charset=utf-8"

    init(directory: String?, servesDemo: Bool, logger: Logger) {
        self.directory = directory
        self.servesDemo = servesDemo
        guard let directory else {
            client = StaticAsset(text: BrowserClientModule.text, contentType: Self.clientType)
            demo = servesDemo ? StaticAsset(text: DemoPage.text, contentType: Self.demoType) : nil
            return
        }
        client = StaticAsset(path: directory + "/js/portcullis.js", contentType: Self.clientType)
        demo = servesDemo ? StaticAsset(path: directory + "/demo/index.html", contentType: Self.demoType) : nil
        if client == nil { logger.warning("the browser client is not served: \(directory)/js/portcullis.js cannot be read (gateway.client_directory)") }
        if servesDemo, demo == nil { logger.warning("the demo page is not served: \(directory)/demo/index.html cannot be read (gateway.client_directory)") }
    }

    /// The demo page may load only this gateway's script and talk only to this gateway.
    static let demoPolicy: HTTPFields = [
        .init("Content-Security-Policy")!: "default-src 'self'; script-src 'self' 'unsafe-inline'; connect-src 'self' ws: wss:; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
        .init("Referrer-Policy")!: "no-referrer",
    ]

    func register(on router: Router<GatewayRequestContext>) {
        router.get("/client/portcullis.js") { request, _ -> Response in
            guard let client else { throw missing("js/portcullis.js") }
            return client.response(for: request)
        }
        guard servesDemo else { return }
        router.get("/demo/") { request, _ -> Response in
            guard let demo else { throw missing("demo/index.html") }
            return demo.response(for: request, extraHeaders: Self.demoPolicy)
        }
    }

    private func missing(_ file: String) -> GatewayError {
        GatewayError(.notFound, "not_found", "this gateway has no \(file) in gateway.client_directory (\(directory ?? "")); put the file there or remove the setting to serve the built-in one")
    }
}
