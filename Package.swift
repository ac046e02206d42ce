// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "portcullis",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "JOSE", targets: ["JOSE"]),
        .library(name: "RuntimeAPI", targets: ["RuntimeAPI"]),
        .library(name: "StateSurface", targets: ["StateSurface"]),
        .library(name: "SecurityGuard", targets: ["SecurityGuard"]),
        .library(name: "TrafficCop", targets: ["TrafficCop"]),
        .library(name: "TrustedIssuers", targets: ["TrustedIssuers"]),
        .library(name: "Runtime", targets: ["Runtime"]),
        .library(name: "Gateway", targets: ["Gateway"]),
        .executable(name: "portcullis", targets: ["portcullis"]),
    ],
    dependencies: [
        // swift-nio, swift-nio-extras and Hummingbird up to the next minor version only: the data plane
        // relies on how their HTTP/1 handling behaves (DependencyBehaviourTests); README, "Updating the dependencies".
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", .upToNextMinor(from: "2.28.1")),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio", .upToNextMinor(from: "2.101.2")),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: [.defaults, "YAML"]),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras", .upToNextMinor(from: "1.35.2")),
        // HTTP/2 at the edge (streams into the same data plane); also async-http-client's.
        .package(url: "https://github.com/apple/swift-nio-http2", .upToNextMinor(from: "1.46.0")),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        // Envoy's ext_authz over gRPC: its messages generated once with protoc-gen-swift (scripts/generate-protos.sh).
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", from: "2.9.2"),
        .package(url: "https://github.com/grpc/grpc-swift-protobuf", from: "2.4.1"),
        // A caller's certificate names under ext_authz.tls (already built for grpc-swift's transport).
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        // Traces: the Tracing API, and swift-otel's OTLP/HTTP exporter alone (no gRPC exporter built).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(
            name: "CLibCryptoSetup",
            dependencies: ["CLibCrypto"]
        ),
        .target(name: "CBuildInfo"),
        .target(
            name: "JOSE",
            dependencies: ["CLibCrypto", "CLibCryptoSetup"]
        ),
        .target(
            name: "ConfigurationReading",
            dependencies: [
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Yams", package: "Yams"),
            ]
        ),
        .target(
            name: "RuntimeAPI",
            dependencies: ["JOSE"]
        ),
        .target(
            name: "AgentLink",
            dependencies: ["RuntimeAPI", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .target(
            name: "Resilience"
        ),
        .target(
            name: "StateSurface",
            dependencies: [
                "Resilience",
                "ConfigurationReading",
                "RuntimeAPI",
                "Traces",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "TrafficCop",
            dependencies: ["JOSE"]
        ),
        .target(
            name: "TrustedIssuers",
            dependencies: [
                "Traces",
                "ConfigurationReading",
                "JOSE",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "SecurityGuard",
            dependencies: [
                "JOSE",
                "Resilience",
                "StateSurface",
                "TrustedIssuers",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .target(
            name: "Runtime",
            dependencies: [
                "Resilience",
                "ConfigurationReading",
                "JOSE",
                "RuntimeAPI",
                "AgentLink",
                "StateSurface",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Logs, the access log and metrics: what every part of the edge reports through.
        .target(
            name: "Observability",
            dependencies: [
                "JOSE",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Traces (OpenTelemetry): the settings, the OTLP/HTTP export, and the spans the data plane,
        // forward-auth and ext_authz start, each only when a trace is sampled.
        .target(
            name: "Traces",
            dependencies: [
                "ConfigurationReading",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The files the gateway serves as they were at build time (scripts/embed-files.sh writes it).
        .target(
            name: "EmbeddedAssets"
        ),
        // HTTP/1 at the edge connection, beneath both the API and the data plane: the error model and
        // its answers, request-target and header screening, the answers-owed books, the edge limits.
        .target(
            name: "EdgeHTTP",
            dependencies: [
                "JOSE",
                "Resilience",
                "RuntimeAPI",
                "SecurityGuard",
                "TrafficCop",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The gateway's side of the Runtime: its client and circuit, assertions, admission, the
        // caller's token and the session-ownership view.
        .target(
            name: "RuntimeAccess",
            dependencies: [
                "Traces",
                "EdgeHTTP",
                "JOSE",
                "Observability",
                "Resilience",
                "RuntimeAPI",
                "SecurityGuard",
                "TrafficCop",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // MCP servers behind routes: each an OAuth protected resource (RFC 9728) with its canonical URL,
        // its metadata, its challenge and its Origin rule.
        .target(
            name: "MCPResource",
            dependencies: ["JOSE"]
        ),
        // What an MCP route's callers may do: its JSON-RPC bodies read strictly, the Mcp-Method and
        // Mcp-Name fields checked against them, rules per tool, prompt, resource and method.
        .target(
            name: "MCPPolicy",
            dependencies: ["JOSE", "TrafficCop"]
        ),
        // The gateway as an OAuth 2.1 authorization server: clients, authorization requests, PKCE,
        // codes, consents, the access and refresh tokens it issues for MCP resources.
        .target(
            name: "AuthorizationServer",
            dependencies: [
                "ConfigurationReading", "JOSE", "MCPResource", "SecurityGuard", "StateSurface",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // The proxy path of gateway.routes on the event loop, front to upstream; no Hummingbird.
        .target(
            name: "DataPlane",
            dependencies: [
                "EdgeHTTP",
                "MCPPolicy",
                "MCPResource",
                "RuntimeAccess",
                "JOSE",
                "Observability",
                "Traces",
                "Resilience",
                "RuntimeAPI",
                "SecurityGuard",
                "TrafficCop",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // Envoy's ext_authz and gRPC's health service, generated from their .proto files
        // (scripts/generate-protos.sh; Sources/EnvoyAuthProtos/PROTOS.md says what came from where).
        .target(
            name: "EnvoyAuthProtos",
            dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")],
            exclude: ["PROTOS.md"]
        ),
        // Envoy's external authorization (ext_authz) on listeners of its own: the data plane's access
        // decision asked by an Envoy, and answered in its terms.
        .target(
            name: "ExtAuthz",
            dependencies: [
                "ConfigurationReading",
                "DataPlane",
                "Traces",
                "EdgeHTTP",
                "EnvoyAuthProtos",
                "JOSE",
                "SecurityGuard",
                "TrafficCop",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The guarded agent sockets: the WebSocket guard (token, session, owner, origin, limits before
        // any 101), each socket's handler, the agent links to the Runtime per event loop, the registry.
        .target(
            name: "SocketGuard",
            dependencies: [
                "AgentLink",
                "DataPlane",
                "EdgeHTTP",
                "JOSE",
                "Observability",
                "RuntimeAPI",
                "RuntimeAccess",
                "SecurityGuard",
                "TrafficCop",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // Signing the browser in through a trusted provider (the OpenID Connect code flow) and the
        // provider's back-channel logout.
        .target(
            name: "ProviderLogin",
            dependencies: [
                "Traces",
                "ConfigurationReading",
                "JOSE",
                "StateSurface",
                "TrustedIssuers",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // People's connected accounts at other services: the gateway as their OAuth client, the tokens sealed.
        .target(
            name: "ConnectedAccounts",
            dependencies: [
                "ConfigurationReading",
                "JOSE",
                "ProviderLogin",
                "StateSurface",
                "TrustedIssuers",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Tokens for an upstream's audience exchanged at the company's provider for a person (RFC 8693,
        // Entra's on-behalf-of), kept per person and target.
        .target(
            name: "TokenExchange",
            dependencies: [
                "DataPlane",
                "ProviderLogin",
                "TrustedIssuers",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The public API's routes, the agent sockets and the composition root (`portcullis serve`).
        .target(
            name: "Gateway",
            dependencies: [
                "AuthorizationServer",
                "ExtAuthz",
                "ConnectedAccounts",
                "ConfigurationReading",
                "DataPlane",
                "Traces",
                "TokenExchange",
                "MCPPolicy",
                "MCPResource",
                "EdgeHTTP",
                "EmbeddedAssets",
                "Observability",
                "ProviderLogin",
                "RuntimeAccess",
                "SocketGuard",
                "Resilience",
                "JOSE",
                "RuntimeAPI",
                "AgentLink",
                "StateSurface",
                "SecurityGuard",
                "TrafficCop",
                "TrustedIssuers",
                "Runtime",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "portcullis",
            dependencies: [
                "AuthorizationServer",
                "CBuildInfo",
                "ConfigurationReading",
                "EdgeHTTP",
                "JOSE",
                "RuntimeAPI",
                "StateSurface",
                "SecurityGuard",
                "TrafficCop",
                "Runtime",
                "Gateway",
                "ConnectedAccounts",
                "Observability",
                "Traces",
                "ProviderLogin",
                "TrustedIssuers",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
                // sd_notify's datagram to systemd (ServiceManagerNotification).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The benchmark's floor (scripts/bench-proxy.sh): a minimal SwiftNIO reverse proxy, no product.
        .executableTarget(
            name: "floor-proxy",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            path: "Benchmarks/FloorProxy",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(
            name: "JOSETests",
            dependencies: ["JOSE", "PortcullisTestSupport"]
        ),
        .target(
            name: "PortcullisTestSupport",
            path: "Tests/PortcullisTestSupport"
        ),
        .executableTarget(
            name: "portcullis-probes",
            dependencies: [
                "StateSurface",
                "Runtime",
                "PortcullisTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Tests/PortcullisProbes"
        ),
        .testTarget(
            name: "StateSurfaceTests",
            dependencies: ["StateSurface", "RuntimeAPI", "JOSE", "Runtime", "portcullis", "portcullis-probes", "PortcullisTestSupport"]
        ),
        .testTarget(
            name: "TrafficCopTests",
            dependencies: ["TrafficCop"]
        ),
        .testTarget(
            name: "MCPPolicyTests",
            dependencies: ["MCPPolicy", "JOSE", "TrafficCop"]
        ),
        .testTarget(
            name: "SecurityGuardTests",
            dependencies: ["SecurityGuard", "StateSurface", "RuntimeAPI", "JOSE"]
        ),
        .testTarget(
            name: "RuntimeTests",
            dependencies: [
                "Runtime",
                "AgentLink",
                "PortcullisTestSupport",
                "RuntimeAPI",
                "StateSurface",
                "JOSE",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWSTesting", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: [
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                "Gateway",
                "AuthorizationServer",
                "ConnectedAccounts",
                "DataPlane",
                "EnvoyAuthProtos",
                "ExtAuthz",
                "TokenExchange",
                "MCPPolicy",
                "MCPResource",
                "EdgeHTTP",
                "ProviderLogin",
                "RuntimeAccess",
                "SocketGuard",
                "Observability",
                "RuntimeAPI",
                "Runtime",
                "SecurityGuard",
                "StateSurface",
                "TrafficCop",
                "TrustedIssuers",
                "JOSE",
                "portcullis",
                "portcullis-probes",
                "PortcullisTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        .testTarget(
            name: "DataPlaneTests",
            dependencies: [
                "DataPlane",
                "EdgeHTTP",
                "Traces",
                "PortcullisTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PortcullisCLITests",
            dependencies: ["JOSE", "ConfigurationReading", "Gateway", "Runtime", "StateSurface", "TrustedIssuers", "portcullis", "PortcullisTestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
