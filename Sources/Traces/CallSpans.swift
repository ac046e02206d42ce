import Foundation
import Tracing

/// The spans of the calls made for a request served in one task (the gateway's own endpoints):
/// the store, a provider's token endpoint, the Runtime, each a client span, the request's child.
///
/// Hummingbird answers each of the gateway's own endpoints in one task, so the span its tracing
/// middleware starts is set here, as a task-local, for every call made beneath it in any module,
/// with nothing passed down. Where it is not set (tracing off, a request not recorded, the data
/// plane's event loop, whose waits name their own spans) a call makes no span and costs one
/// task-local read. A task the request starts (`Task {}`) inherits it: a call it makes after the
/// answer is still the request's child, ending after it.
public struct CallSpans: Sendable {
    /// The request this task serves, when its trace is recorded.
    @TaskLocal public static var current: CallSpans?

    let tracer: RequestTracer
    let parent: RequestSpan

    public init(tracer: RequestTracer, parent: RequestSpan) {
        self.tracer = tracer
        self.parent = parent
    }

    /// `body` inside a client span named `name`, the child of this task's request span, with the
    /// attributes `attributes` writes; a throw marks the span an error. Without a request span,
    /// `body` alone (`nil` for its span), and neither autoclosure is run.
    public static func traced<T>(
        _ name: @autoclosure () -> String,
        isolation: isolated (any Actor)? = #isolation,
        attributes: (inout SpanAttributes) -> Void = { _ in },
        _ body: (RequestSpan?) async throws -> T
    ) async rethrows -> T {
        guard let current else { return try await body(nil) }
        let span = current.tracer.startClientSpan(name(), parent: current.parent)
        span.set(attributes)
        do {
            let value = try await body(span)
            span.end()
            return value
        } catch {
            span.end(failed: true, because: String(describing: type(of: error)))
            throw error
        }
    }

    /// The Trace Context fields a call made in `span` carries to its peer (`span` as the parent).
    public static func fields(of span: RequestSpan) -> TraceContextFields? {
        current.map { $0.tracer.fields(of: span) }
    }

    /// A store call's span: `store <operation>`, with `db.system.name` and `db.operation.name`
    /// (OpenTelemetry's database conventions). `function` is the store method's `#function`; its
    /// argument labels are dropped, so a name is one per method name (overloads share it).
    public static func store<T>(
        _ system: StoreSystem, _ function: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async rethrows -> T {
        guard current != nil else { return try await body() }
        let operation = function.prefix { $0 != "(" }
        return try await traced(
            "store \(operation)",
            attributes: { attributes in
                attributes[TraceAttribute.databaseSystem] = system.rawValue
                attributes[TraceAttribute.databaseOperation] = String(operation)
            }, { _ in try await body() })
    }

    /// A call over HTTP to `url`'s server: a client span named for the method (OpenTelemetry's
    /// HTTP conventions), with `server.address`, `server.port` and `portcullis.peer` (`provider`,
    /// `runtime`); `body` gives its span the answer's status (`answered`), or marks it failed.
    /// Never the URL's path or query in the span: a peer's URL may carry what is not ours to log.
    public static func http<T>(
        _ method: String, to url: String, peer: String, isolation: isolated (any Actor)? = #isolation, _ body: (RequestSpan?) async throws -> T
    ) async rethrows -> T {
        guard current != nil else { return try await body(nil) }
        let server = ServerAddress(url: url)
        return try await traced(
            method,
            attributes: { attributes in
                attributes[TraceAttribute.httpMethod] = method
                attributes[TraceAttribute.peer] = peer
                if let server {
                    attributes[TraceAttribute.serverAddress] = server.host
                    attributes[TraceAttribute.serverPort] = server.port
                }
            }, body)
    }

    /// The status a call's answer had, on its span: 4xx and 5xx mark a client span an error
    /// (OpenTelemetry's HTTP conventions for a client).
    public static func answered(_ span: RequestSpan?, status: Int) {
        guard let span else { return }
        span.setStatusCode(status)
        if status >= 400 { span.markFailed(because: "HTTP \(status)") }
    }

    /// Which database a store call went to (`db.system.name`'s values).
    public enum StoreSystem: String, Sendable {
        case sqlite
        case postgresql
    }

    /// The host and port of an absolute `http` or `https` URL (the scheme's port when it names
    /// none); `nil` for anything else.
    struct ServerAddress: Equatable {
        let host: String
        let port: Int

        init?(url: String) {
            // Foundation's reading of the authority (IPv6 literals, user information, the port).
            guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
                let host = components.host, !host.isEmpty
            else { return nil }
            let port = components.port ?? (scheme == "https" ? 443 : 80)
            guard (1...65_535).contains(port) else { return nil }
            self.host = (host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host).lowercased()
            self.port = port
        }
    }
}
