import ConfigurationReading
import Foundation

/// `tracing`: OpenTelemetry traces, exported over OTLP/HTTP to a collector (off unless
/// `tracing.endpoint` is set).
///
/// Sampling follows the caller: a request whose valid `traceparent` says sampled is traced, one
/// that says not sampled is not; a request that starts a trace is traced at `sample_ratio`
/// (OpenTelemetry's `parentbased_traceidratio`).
public struct TracingSettings: Sendable, Equatable {
    /// `tracing.endpoint`: where spans are sent, the collector's OTLP/HTTP traces URL. A URL
    /// without a path (`http://collector:4318`) gets the standard `/v1/traces`.
    public var endpoint: String
    /// `tracing.sample_ratio`: the share of new traces recorded, from 0 to 1 (1: every one).
    public var sampleRatio = 1.0
    /// `tracing.service_name`: the `service.name` the spans carry.
    public var serviceName = "portcullis"
    /// `tracing.continue_any_caller`: continue any client's `traceparent` (and follow its sampled
    /// flag). Off: only a peer in `gateway.trusted_proxies` is followed, and a request from
    /// anyone else starts its trace here, sampled at `sample_ratio`, so a client on the internet
    /// cannot have every one of its requests recorded.
    public var continueAnyCaller = false

    public init(endpoint: String) {
        self.endpoint = endpoint
    }

    /// Reads `tracing.*`; `nil` when `tracing.endpoint` is not set.
    ///
    /// - Throws: `ConfigurationError` naming the first key whose value cannot be used.
    public init?(reading values: ConfigurationValues) throws(ConfigurationError) {
        let endpoint = try values.url("tracing.endpoint")
        let ratio = try values.double("tracing.sample_ratio", in: 0...1)
        let name = try values.string("tracing.service_name")
        let anyCaller = try values.bool("tracing.continue_any_caller")
        guard let endpoint else { return nil }
        guard let url = URL(string: endpoint), url.user == nil, url.password == nil else {
            throw ConfigurationError(
                key: "tracing.endpoint", "must not carry a user or password (it is logged at start): give the collector's credentials in OTEL_EXPORTER_OTLP_TRACES_HEADERS")
        }
        self.init(endpoint: Self.tracesURL(endpoint))
        if let ratio { sampleRatio = ratio }
        if let anyCaller { continueAnyCaller = anyCaller }
        if let name {
            guard name.utf8.count <= 128, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw ConfigurationError(key: "tracing.service_name", "must be a name of at most 128 characters without control characters, such as portcullis")
            }
            serviceName = name
        }
    }

    /// The collector's traces URL: as written, or with `/v1/traces` when it names no path
    /// (as `OTEL_EXPORTER_OTLP_ENDPOINT` is read).
    static func tracesURL(_ endpoint: String) -> String {
        guard let url = URL(string: endpoint), url.path.isEmpty || url.path == "/" else { return endpoint }
        return (endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint) + "/v1/traces"
    }
}
