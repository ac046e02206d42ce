import AsyncHTTPClient
import Foundation
import JOSE
import NIOCore
import NIOHTTP1
import NIOSSL
import Traces

/// What one successful fetch of an issuer's keys brought.
struct FetchedKeys: Sendable {
    let keys: [String: JWSKey]
    let skipped: [String]
    /// The JWKS URL the keys came from (from discovery, or as configured).
    let jwksURL: String
    /// Seconds until they should be fetched again: the answer's max-age, clamped to 5 min..24 h.
    let maximumAge: Double
    /// The login endpoints of a discovery document: `nil` without discovery, the sentence saying
    /// what is missing when the document names no code flow.
    var endpoints: Result<ProviderEndpoints, KeyFetchError>? = nil
}

/// A fetch that failed, in one sentence naming the URL (never a token).
public struct KeyFetchError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Fetches an issuer's discovery document and JWKS, off the hot path, with bounds:
/// HTTPS verified against the system's roots or the issuer's `ca_file`, plain
/// http only to loopback, at most 1 MiB an answer, 10 s a fetch, redirects
/// followed only within the same origin (three at most). A URL named by a token
/// is never fetched: the URLs come from the configuration and discovery only.
///
/// Each fetch has an HTTP client of its own, shut down when the fetch ends:
/// fetches are minutes apart, and nothing is left to shut down when the
/// gateway stops (or fails to start) between them.
package final class KeyFetcher: Sendable {
    static let maximumBytes = 1 << 20
    static let timeout: TimeAmount = .seconds(10)
    let configuration: HTTPClient.Configuration

    init(caFile: String?) {
        configuration = Self.clientConfiguration(caFile: caFile)
    }

    /// The HTTP client settings for talking to a provider: its CA file when configured, no
    /// redirects followed by the client, 5 s to connect and 10 s to read, HTTP/1.1.
    package static func clientConfiguration(caFile: String?) -> HTTPClient.Configuration {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile { tls.trustRoots = .file(caFile) }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow, timeout: .init(connect: .seconds(5), read: .seconds(10)))
        configuration.httpVersion = .http1Only
        return configuration
    }

    /// The issuer's keys, by discovery or from its JWKS URL.
    func fetchKeys(for issuer: TrustedIssuer) async throws(KeyFetchError) -> FetchedKeys {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let result: Result<FetchedKeys, KeyFetchError>
        do throws(KeyFetchError) {
            result = .success(try await fetchKeys(for: issuer, with: client))
        } catch {
            result = .failure(error)
        }
        try? await client.shutdown()
        return try result.get()
    }

    private func fetchKeys(for issuer: TrustedIssuer, with client: HTTPClient) async throws(KeyFetchError) -> FetchedKeys {
        let jwksURL: String
        var endpoints: Result<ProviderEndpoints, KeyFetchError>?
        switch issuer.keySource {
        case .jwks(let url):
            jwksURL = url
        case .discovery:
            let (body, _) = try await get(issuer.discoveryURL, with: client)
            let document: JSONObject
            do {
                document = try StrictJSONReader().parseObject(body)
            } catch {
                throw KeyFetchError("the discovery document at \(issuer.discoveryURL) is not strict JSON: \(error.message)")
            }
            guard document["issuer"]?.stringValue == issuer.issuer else {
                throw KeyFetchError("the discovery document at \(issuer.discoveryURL) names another issuer than \(issuer.issuer)")
            }
            guard let url = document["jwks_uri"]?.stringValue, TrustedIssuer.isFetchable(url) else {
                throw KeyFetchError("the discovery document at \(issuer.discoveryURL) has no https jwks_uri")
            }
            jwksURL = url
            endpoints = ProviderEndpoints.read(document, issuer: issuer)
        case .secret:
            throw KeyFetchError("the issuer \(issuer.issuer) uses a shared secret; nothing to fetch")
        }
        let (body, maximumAge) = try await get(jwksURL, with: client)
        do {
            let jwks = try ProviderJWKS(body, allowed: issuer.algorithms)
            return FetchedKeys(keys: jwks.keys, skipped: jwks.skipped, jwksURL: jwksURL, maximumAge: maximumAge, endpoints: endpoints)
        } catch let error as KeyError {
            throw KeyFetchError("the JWKS at \(jwksURL): \(error.message)")
        } catch {
            throw KeyFetchError("the JWKS at \(jwksURL) could not be read")
        }
    }

    /// GETs `url` (same-origin redirects followed): the body and its max-age.
    private func get(_ url: String, with client: HTTPClient) async throws(KeyFetchError) -> (body: [UInt8], maximumAge: Double) {
        var current = url
        for _ in 0...3 {
            guard TrustedIssuer.isFetchable(current), let origin = Self.origin(current) else {
                throw KeyFetchError("\(current) is not an https URL (plain http only to loopback)")
            }
            var request = HTTPClientRequest(url: current)
            request.headers.add(name: "Accept", value: "application/json")
            let response: HTTPClientResponse
            let body: ByteBuffer
            do {
                (response, body) = try await CallSpans.http("GET", to: current, peer: "provider") { span in
                    let response = try await client.execute(request, deadline: .now() + Self.timeout)
                    CallSpans.answered(span, status: Int(response.status.code))
                    return (response, try await response.body.collect(upTo: Self.maximumBytes))
                }
            } catch is NIOTooManyBytesError {
                throw KeyFetchError("\(current) answered more than 1 MiB")
            } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
                throw KeyFetchError("\(current) did not answer within \(Self.timeout.nanoseconds / 1_000_000_000) s")
            } catch let error as NIOSSLError {
                throw KeyFetchError("\(current): TLS failed (\(error)); check ca_file")
            } catch {
                throw KeyFetchError("\(current) cannot be reached (\(Self.describe(error)))")
            }
            switch response.status.code {
            case 200:
                return (Array(body.readableBytesView), Self.maximumAge(response.headers.first(name: "Cache-Control")))
            case 301, 302, 303, 307, 308:
                guard let location = response.headers.first(name: "Location"),
                    let next = URL(string: location, relativeTo: URL(string: current))?.absoluteString, Self.origin(next) == origin
                else { throw KeyFetchError("\(current) redirects to another origin, which is not followed") }
                current = next
            default:
                throw KeyFetchError("\(current) answered \(response.status.code)")
            }
        }
        throw KeyFetchError("\(url) redirects more than three times")
    }

    /// scheme://host:port, lower-cased.
    package static func origin(_ text: String) -> String? {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        return "\(scheme)://\(host):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }

    /// The answer's `max-age`, clamped to 5 minutes..24 hours; an hour without one, or with one
    /// that is not delta-seconds.
    ///
    /// Delta-seconds are digits only (RFC 9111 §1.2.2): `nan`, `inf`, a sign, a fraction or an
    /// exponent is not one, and a number too large to hold counts as 2^31 (then 24 hours). Read
    /// as a `Double`, `max-age=nan` had made the next refresh time NaN, and refreshes stopped.
    static func maximumAge(_ cacheControl: String?) -> Double {
        let directive = cacheControl?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.first { $0.hasPrefix("max-age=") }
        let seconds = directive.flatMap { deltaSeconds($0.dropFirst("max-age=".count)) } ?? 3_600
        return min(max(seconds, 300), 86_400)
    }

    /// `text` as delta-seconds: one or more ASCII digits; past 2^31, 2^31.
    static func deltaSeconds(_ text: Substring) -> Double? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        var value = 0
        for digit in text.utf8 {
            value = value * 10 + Int(digit - UInt8(ascii: "0"))
            if value >= 1 << 31 { return Double(1 << 31) }
        }
        return Double(value)
    }

    private static func describe(_ error: any Error) -> String {
        let text = String(describing: error)
        return text.count > 160 ? String(text.prefix(160)) + "..." : text
    }
}
