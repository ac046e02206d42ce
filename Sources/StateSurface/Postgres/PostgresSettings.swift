import ConfigurationReading
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How to reach the PostgreSQL database, read from `storage.postgres_url` and its companions.
///
/// The URL's password is a secret: `name` (used in logs, errors and readiness)
/// leaves out the user and the password.
public struct PostgresSettings: Sendable, Equatable {
    /// TLS to the database. `disable` is the default only for a loopback host or a
    /// Unix socket; anywhere else the default is `verify-full`.
    public enum TLSMode: String, Sendable, Equatable {
        /// Plain TCP.
        case disable
        /// TLS, without checking the server's certificate (encrypts; does not authenticate).
        case require
        /// TLS, the certificate checked against `caFile` (or the system's roots) and the host name.
        case verifyFull = "verify-full"
    }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    /// Connections in the pool, at most.
    public var poolSize: Int = 10
    /// Calls waiting on the database at once, at most: past it a call is refused at once (503) rather than queued.
    public var maximumWaiters: Int = 1_000
    public var connectTimeout: Double = 5
    /// The server cancels a statement running longer than this (`statement_timeout`).
    public var queryTimeout: Double = 10
    public var tls: TLSMode
    /// PEM file of the CA that signed the server's certificate, for `verify-full`.
    public var caFile: String?

    /// Parses `postgres://user:password@host:port/database` (or `postgresql://`).
    public init(url: String, key: String = "storage.postgres_url") throws(ConfigurationError) {
        let example = "postgres://portcullis:PASSWORD@127.0.0.1:5432/portcullis"
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            ["postgres", "postgresql"].contains(scheme), let host = components.host, !host.isEmpty
        else { throw ConfigurationError(key: key, "must be a URL such as \(example)") }
        guard components.query == nil, components.fragment == nil else {
            throw ConfigurationError(key: key, "takes no query string; set TLS with storage.postgres_tls and the pool with storage.postgres_pool_size")
        }
        guard let user = components.user, !user.isEmpty else { throw ConfigurationError(key: key, "must name the user, as in \(example)") }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else { throw ConfigurationError(key: key, "must name the database, as in \(example)") }
        self.host = host
        self.port = components.port ?? 5432
        self.username = user.removingPercentEncoding ?? user
        self.password = components.password.map { $0.removingPercentEncoding ?? $0 }
        self.database = database.removingPercentEncoding ?? database
        self.tls = Self.isLoopback(host) ? .disable : .verifyFull
    }

    /// `postgresql://host:port/database`: no user, no password.
    public var name: String { "postgresql://\(host.contains(":") ? "[\(host)]" : host):\(port)/\(database)" }

    /// Whether `host` is loopback by its spelling alone: `localhost`, an IPv4 literal in
    /// 127.0.0.0/8, or `::1` (an IPv4-mapped 127/8 too). A DNS name such as
    /// `127.db.example.com` is not, whatever it resolves to.
    static func isLoopback(_ host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        let literal = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var v4 = in_addr()
        if inet_pton(AF_INET, literal, &v4) == 1 {
            return UInt32(bigEndian: v4.s_addr) >> 24 == 127
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, literal, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes == Array(repeating: 0, count: 15) + [1] { return true }
        return bytes.prefix(12) == (Array(repeating: 0, count: 10) + [0xFF, 0xFF])[...] && bytes[12] == 127
    }
}
