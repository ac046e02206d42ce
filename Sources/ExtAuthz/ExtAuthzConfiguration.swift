import ConfigurationReading
import TrafficCop
import X509
import Foundation

/// `ext_authz`: Envoy's external authorization, answered on listeners of its own (off unless a
/// port is set): gRPC (`grpc_port`) and HTTP (`http_port`).
///
/// Its callers are Envoys (a sidecar, a gateway), named by address, and with `tls` by the names in
/// their certificates as well: anybody else could name any request and learn, or obtain an
/// assertion for, what it would get.
public struct ExtAuthzConfiguration: Sendable, Equatable {
    /// `ext_authz.host`: the address the listeners bind (an IP address).
    public var host = "127.0.0.1"
    /// `ext_authz.http_port`: Envoy's HTTP mode (`http_service`); `nil`: off.
    public var httpPort: Int?
    /// `ext_authz.grpc_port`: Envoy's gRPC mode (`grpc_service`, `envoy.service.auth.v3.Authorization`); `nil`: off.
    public var grpcPort: Int?
    /// `ext_authz.path_prefix`: Envoy's `http_service.path_prefix`, put before the original path.
    ///
    /// Never empty: with both sides required to name one, a mismatch refuses every check (404)
    /// instead of deciding `/ext-authz/admin` as a path of its own (a catch-all route's).
    public var pathPrefix = "/ext-authz"
    /// `ext_authz.callers`: the addresses that may ask (127.0.0.1 and ::1 unless set; any address
    /// with `tls`, whose certificate names then say who asks).
    public var callers: [IPNetwork] = Self.loopback
    /// `ext_authz.tls`: TLS on both listeners, and the callers' certificates; `nil`: plaintext.
    public var tls: ExtAuthzTLS?

    /// 127.0.0.1 and ::1 only: with an Istio sidecar in front of the gateway, every workload's
    /// traffic arrives from 127.0.0.6, which the whole of 127.0.0.0/8 would admit.
    public static let loopback = ["127.0.0.1/32", "::1/128"].compactMap(IPNetwork.init)
    /// Every address: the default with `tls`, where a pod's address says nothing of who it is.
    public static let anyAddress = ["0.0.0.0/0", "::/0"].compactMap(IPNetwork.init)

    /// `ext_authz.max_connections`: open connections at once on each listener from addresses in
    /// `callers`; beyond, a connection is closed before a byte of it is read.
    public var maximumConnections = 10_000
    /// Open connections at once on each listener from addresses not in `callers`. They are kept
    /// (each call denied, never an RPC error that an Envoy failing open would let through), but
    /// few: anyone who can reach the port could otherwise hold every slot.
    public static let maximumStrangerConnections = 64

    public init() {}

    /// Reads `ext_authz.*`; `nil` when neither listener is configured.
    ///
    /// - Throws: `ConfigurationError` naming the first key whose value cannot be used.
    public init?(reading values: ConfigurationValues) throws(ConfigurationError) {
        var configuration = ExtAuthzConfiguration()
        if let value = try values.string("ext_authz.host") {
            guard IPNetwork.parseAddress(value) != nil else {
                throw ConfigurationError(key: "ext_authz.host", "must be an IP address such as 0.0.0.0 or 127.0.0.1 (the address the listeners bind), not \"\(value)\"")
            }
            configuration.host = value
        }
        configuration.httpPort = try values.int("ext_authz.http_port", in: 0...65_535)
        configuration.grpcPort = try values.int("ext_authz.grpc_port", in: 0...65_535)
        if let value = try values.string("ext_authz.path_prefix") {
            guard value.hasPrefix("/"), value.utf8.count > 1, !value.hasSuffix("/"), !value.contains("?"), !value.contains("%"), !value.contains("#") else {
                throw ConfigurationError(
                    key: "ext_authz.path_prefix", "must be a path such as /ext-authz (Envoy's http_service.path_prefix, which must say the same), not / and without a trailing slash, query or escapes, not \"\(value)\"")
            }
            configuration.pathPrefix = value
        }
        if let value = try values.int("ext_authz.max_connections", in: 1...1_000_000) { configuration.maximumConnections = value }
        configuration.tls = try ExtAuthzTLS(reading: values)
        if configuration.tls != nil { configuration.callers = Self.anyAddress }
        if let callers = try values.strings("ext_authz.callers") {
            configuration.callers = []
            for text in callers {
                guard let network = IPNetwork(text) else {
                    throw ConfigurationError(key: "ext_authz.callers", "must list IP addresses or CIDR networks such as 10.0.0.0/8 (the Envoys that ask), not \"\(text)\"")
                }
                configuration.callers.append(network)
            }
        }
        guard configuration.httpPort != nil || configuration.grpcPort != nil else { return nil }
        self = configuration
    }

    /// Whether `peer` (an IP address) may ask.
    public func admits(_ peer: String?) -> Bool {
        guard let peer, let bytes = IPNetwork.parseAddress(peer) else { return false }
        return callers.contains { $0.contains(bytes) }
    }

    /// Whether a caller with `certificate` (verified against the client CA by the TLS handshake)
    /// may ask at `now`: always without `tls`; with it, when the certificate names one of
    /// `caller_names` and is within its dates. The dates are checked on each call as well as by
    /// the handshake: a resumed TLS session, or a connection kept open, outlives the handshake's
    /// check, and a mesh's short-lived certificates are its revocation.
    public func admits(certificate: Certificate?, at now: Date = Date()) -> Bool {
        guard let tls else { return true }
        guard let certificate, certificate.notValidBefore <= now, now < certificate.notValidAfter else { return false }
        return tls.callerNames.admits(certificate)
    }
}
