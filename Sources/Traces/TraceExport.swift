import Logging
import OTel
import ServiceLifecycle
import Tracing

/// The OpenTelemetry tracer and the service that batches its spans and sends them over OTLP/HTTP
/// (swift-otel), made from `TracingSettings`.
///
/// The service runs beside the listeners and stops after them, so the last spans are sent. The
/// standard `OTEL_*` environment variables override the settings (OpenTelemetry's rule), for
/// example `OTEL_BSP_SCHEDULE_DELAY` for how often spans are sent.
public struct TraceExport: Sendable {
    /// Starts the spans, sampled as the settings say.
    public let tracer: RequestTracer
    /// Batches and sends the spans: run it in the process's `ServiceGroup`.
    public let service: any Service

    /// - Throws: `TraceExportError` when swift-otel refuses the settings (an `OTEL_*` variable it cannot use).
    public init(settings: TracingSettings, logger: Logger) throws(TraceExportError) {
        var configuration = OTel.Configuration.default
        configuration.serviceName = settings.serviceName
        configuration.diagnosticLogger = .custom(logger)
        // Errors only: swift-otel's warnings quote what it could not read (a caller's trace fields) in full.
        configuration.diagnosticLogLevel = .error
        configuration.propagators = [.traceContext]
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        configuration.traces.enabled = true
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.traces.otlpExporter.endpoint = settings.endpoint
        guard (0...1).contains(settings.sampleRatio) else {
            throw TraceExportError("tracing.sample_ratio must be from 0 to 1, not \(settings.sampleRatio)")
        }
        // The data plane samples at the head (`TraceHeadSampling`): it asks for a span only for a
        // trace it records, so the tracer records what it is asked for, and follows a parent's flag.
        configuration.traces.sampler = .parentBasedAlwaysOn
        do {
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            tracer = RequestTracer(backend.factory, followsAnyCaller: settings.continueAnyCaller, sampleRatio: settings.sampleRatio)
            service = backend.service
        } catch {
            throw TraceExportError("the OpenTelemetry exporter cannot start with these settings (check the OTEL_* environment variables): \(error)")
        }
    }
}

/// The trace exporter cannot start; the message says why.
public struct TraceExportError: Error, Sendable, CustomStringConvertible {
    /// `tracing_unusable`: stable, for scripts.
    public let code = "tracing_unusable"
    public let message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}
