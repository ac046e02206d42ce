import ArgumentParser
import Hummingbird
import Logging

extension Probes {
    /// The upstream of the answer-framing fuzz target (`scripts/fuzz.sh answer-framing`): `/item`
    /// with a sized body and `/stream` with a chunked one, to GET and HEAD alike, and `POST /item`,
    /// as `MixedRequest` expects behind the route `/api/svc`.
    struct FramingUpstream: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "framing-upstream")

        @Option(help: "Listen port on 127.0.0.1.")
        var port: Int

        func run() async throws {
            var logger = Logger(label: "portcullis.debug.framing-upstream")
            logger.logLevel = .warning
            let app = Application(router: Self.router(), configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger)
            try await app.runService()
        }

        static func router() -> Router<BasicRequestContext> {
            let router = Router(options: .autoGenerateHeadEndpoints)
            router.get("/item") { _, _ in Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "item-body"))) }
            router.get("/stream") { _, _ in
                Response(
                    status: .ok, headers: [.contentType: "text/plain"],
                    body: ResponseBody { writer in
                        try await writer.write(ByteBuffer(string: "first "))
                        try await writer.write(ByteBuffer(string: "second"))
                        try await writer.finish(nil)
                    })
            }
            router.post("/item") { request, _ in
                let body = try await request.body.collect(upTo: 1 << 16)
                return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "posted \(body.readableBytes)")))
            }
            return router
        }
    }
}
