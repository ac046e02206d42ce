import DataPlane
import EdgeHTTP
import EnvoyAuthProtos
import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import GRPCProtobuf
import NIOCore
import NIOHTTP1
import NIOPosix
import SwiftProtobuf
import Synchronization
import Traces

/// `envoy.service.auth.v3.Authorization/Check` and `grpc.health.v1.Health/Check`, served with
/// grpc-swift 2 on `ext_authz.grpc_port`.
///
/// A check is decided by the data plane's `AccessDecision` on an event loop (one hop there from
/// the concurrency pool, where grpc-swift runs a handler, and one back); the original request is
/// read from `attributes.request.http`, the client's address from `attributes.source`.
final class ExtAuthzService: RegistrableRPCService {
    static let callerRefused = GatewayError(
        .forbidden, "ext_authz_caller_refused", "ext_authz answers only the addresses ext_authz.callers lists; add this Envoy's address there")
    static let callerCertificateRefused = GatewayError(
        .forbidden, "ext_authz_caller_refused",
        "ext_authz answers only callers whose certificate names one of ext_authz.tls.caller_names and is within its dates; add this Envoy's SPIFFE ID or DNS name there, or renew its certificate")
    static let checkMethod = MethodDescriptor(fullyQualifiedService: "envoy.service.auth.v3.Authorization", method: "Check")
    static let healthMethod = MethodDescriptor(fullyQualifiedService: "grpc.health.v1.Health", method: "Check")
    /// The metric and access log's name for these decisions.
    static let endpoint = "ext_authz (gRPC)"

    let plane: DataPlane
    let configuration: ExtAuthzConfiguration
    let group: MultiThreadedEventLoopGroup
    let requestIDs: Mutex<ConnectionRequestIDs>
    let removals = ExtAuthzRemovalLists()

    init(plane: DataPlane, configuration: ExtAuthzConfiguration, group: MultiThreadedEventLoopGroup = .singleton) {
        self.plane = plane
        self.configuration = configuration
        self.group = group
        self.requestIDs = Mutex(ConnectionRequestIDs())
    }

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(
            forMethod: Self.checkMethod, deserializer: ProtobufDeserializer<Envoy_Service_Auth_V3_CheckRequest>(),
            serializer: ProtobufSerializer<Envoy_Service_Auth_V3_CheckResponse>()
        ) { request, context in
            // Only the Envoys may ask, checked before the message is read. A refusal is a denial, not an
            // RPC error: an Envoy with failure_mode_allow would let an error's request through.
            let peer = Self.address(ofPeer: context.remotePeer)
            let certificate = (context.transportSpecific as? HTTP2ServerTransport.Posix.Context)?.peerCertificate
            let byAddress = !self.configuration.admits(peer)
            guard !byAddress, self.configuration.admits(certificate: certificate) else {
                let requestID = self.requestIDs.withLock { $0.next() }
                self.plane.logger.notice(
                    byAddress ? "ext_authz refused a check: its address is not in ext_authz.callers" : "ext_authz refused a check: its certificate names none of ext_authz.tls.caller_names, or is outside its dates",
                    metadata: ["peer": "\(peer ?? "unknown")", "listener": "grpc", "names": "\(certificate.map(ExtAuthzCallerNames.names(in:)) ?? [])"])
                let denial = ExtAuthzDenial(byAddress ? Self.callerRefused : Self.callerCertificateRefused, signIn: nil, requestID: requestID)
                return StreamingServerResponse(single: ServerResponse(message: Self.denied(denial, code: 7, caller: nil)))
            }
            let single = try await ServerRequest(stream: request)
            // Envoy's span for this check, when its tracing is on: the decision's parent.
            let askerTrace = TraceContextFields.screened(
                traceparents: Array(single.metadata[stringValues: "traceparent"]), tracestates: Array(single.metadata[stringValues: "tracestate"]))
            let answer = try await self.check(single.message, peer: peer, askerTrace: askerTrace)
            return StreamingServerResponse(single: ServerResponse(message: answer))
        }
        router.registerHandler(
            forMethod: Self.healthMethod, deserializer: ProtobufDeserializer<Grpc_Health_V1_HealthCheckRequest>(),
            serializer: ProtobufSerializer<Grpc_Health_V1_HealthCheckResponse>()
        ) { request, _ in
            // The mesh's probes: the whole server ("") and the one service it serves.
            let single = try await ServerRequest(stream: request)
            guard ["", "envoy.service.auth.v3.Authorization"].contains(single.message.service) else {
                throw RPCError(code: .notFound, message: "no service \(single.message.service.prefix(100)) here: ask for envoy.service.auth.v3.Authorization or the server (\"\")")
            }
            var health = Grpc_Health_V1_HealthCheckResponse()
            health.status = .serving
            return StreamingServerResponse(single: ServerResponse(message: health))
        }
    }

    /// The IP address in a grpc-swift peer description (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`).
    static func address(ofPeer peer: String) -> String? {
        if peer.hasPrefix("ipv4:") {
            let rest = peer.dropFirst(5)
            return rest.lastIndex(of: ":").map { String(rest[..<$0]) } ?? String(rest)
        }
        if peer.hasPrefix("ipv6:") {
            let rest = peer.dropFirst(5)
            guard rest.first == "[", let close = rest.firstIndex(of: "]") else { return String(rest) }
            return String(rest[rest.index(after: rest.startIndex)..<close])
        }
        return nil
    }

    /// One check, decided on an event loop.
    func check(
        _ request: Envoy_Service_Auth_V3_CheckRequest, peer: String?, askerTrace: TraceContextFields = TraceContextFields()
    ) async throws -> Envoy_Service_Auth_V3_CheckResponse {
        let loop = group.any()
        let (plane, removals, requestID) = (plane, removals, requestIDs.withLock { $0.next() })
        let started = ContinuousClock.now
        let http = request.attributes.request.http
        let headers = Self.headers(of: http)
        let source = request.attributes.source.address.socketAddress.address
        let client = plane.clientAddress(peer: source.isEmpty ? peer : source, forwardedFor: [])
        let promise = loop.makePromise(of: Envoy_Service_Auth_V3_CheckResponse.self)
        loop.execute {
            let finish: (Envoy_Service_Auth_V3_CheckResponse, Int, AccessDecision?) -> Void = { response, status, decision in
                plane.recordDecision(
                    endpoint: Self.endpoint, requestID: requestID, method: AccessQuestion.metricLabel(http.method), status: status, nanoseconds: (ContinuousClock.now - started).nanoseconds,
                    protocol: "gRPC", userID: decision?.userID, userName: decision?.userName)
                promise.succeed(response)
            }
            let table = plane.table.current
            var question: AccessQuestion
            do throws(GatewayError) {
                question = try AccessQuestion.envoyCheck(
                    uri: http.path, method: http.method, host: http.host.isEmpty ? nil : http.host, headers: headers, hostRequired: table.hasHostRoutes, client: client)
                if askerTrace.traceparent != nil { question.askerTrace = askerTrace }
            } catch {
                let denial = ExtAuthzDenial(error, signIn: nil, requestID: requestID)
                return finish(Self.denied(denial, code: GRPCRequest.status(for: error), caller: nil), denial.status, nil)
            }
            let decision = AccessDecision(plane: plane, question: question, eventLoop: loop, requestID: requestID)
            decision.decide(table: table) { verdict in
                switch verdict {
                case .allowed(let grant):
                    let upstream = ExtAuthzUpstreamFields(grant: grant, headers: headers, removals: removals.list(for: table))
                    guard !upstream.isOversized else {
                        let denial = ExtAuthzDenial(ExtAuthzUpstreamFields.tooManyFields, signIn: nil, requestID: requestID)
                        return finish(Self.denied(denial, code: 3, caller: nil), denial.status, decision)
                    }
                    finish(Self.allowed(upstream, grant: grant), 200, decision)
                case .denied(let error, let signIn):
                    let denial = ExtAuthzDenial(error, signIn: signIn, requestID: requestID)
                    let code = signIn != nil ? 16 : GRPCRequest.status(for: error)
                    finish(Self.denied(denial, code: code, caller: decision.userID.map { ($0, decision.route?.template) }), denial.status, decision)
                }
            }
        }
        return try await promise.futureResult.get()
    }

    /// The original request's fields: `header_map` when Envoy sends them raw (`encode_raw_headers`), else `headers`.
    static func headers(of http: Envoy_Service_Auth_V3_AttributeContext.HttpRequest) -> HTTPHeaders {
        var headers = HTTPHeaders()
        if http.hasHeaderMap {
            for field in http.headerMap.headers where !field.key.hasPrefix(":") {
                headers.add(name: field.key, value: field.rawValue.isEmpty ? field.value : String(decoding: field.rawValue, as: UTF8.self))
            }
        } else {
            for (name, value) in http.headers where !name.hasPrefix(":") { headers.add(name: name, value: value) }
        }
        return headers
    }

    static func allowed(_ upstream: ExtAuthzUpstreamFields, grant: AccessGrant) -> Envoy_Service_Auth_V3_CheckResponse {
        var ok = Envoy_Service_Auth_V3_OkHttpResponse()
        ok.headers = upstream.set.map { field in
            var option = Envoy_Config_Core_V3_HeaderValueOption()
            option.header.key = field.name
            option.header.value = field.value
            option.appendAction = .overwriteIfExistsOrAdd
            return option
        }
        ok.headersToRemove = upstream.remove
        var response = Envoy_Service_Auth_V3_CheckResponse()
        response.status.code = 0
        response.okResponse = ok
        response.dynamicMetadata = metadata(userID: grant.caller?.userID, tenantID: grant.caller?.tenantID, clientID: grant.caller?.clientID, route: grant.route.template)
        return response
    }

    static func denied(_ denial: ExtAuthzDenial, code: Int, caller: (userID: String, route: String?)?) -> Envoy_Service_Auth_V3_CheckResponse {
        var denied = Envoy_Service_Auth_V3_DeniedHttpResponse()
        denied.status.code = Envoy_Type_V3_StatusCode(rawValue: denial.status) ?? .forbidden
        denied.headers = denial.fields.map { field in
            var option = Envoy_Config_Core_V3_HeaderValueOption()
            option.header.key = field.name
            option.header.value = field.value
            option.appendAction = .overwriteIfExistsOrAdd
            return option
        }
        denied.body = String(decoding: denial.body, as: UTF8.self)
        var response = Envoy_Service_Auth_V3_CheckResponse()
        response.status.code = Int32(code)
        response.deniedResponse = denied
        if let caller { response.dynamicMetadata = metadata(userID: caller.userID, tenantID: nil, clientID: nil, route: caller.route) }
        return response
    }

    /// `dynamic_metadata` for the mesh's own logs and rules: who, through which client, on which route.
    static func metadata(userID: String?, tenantID: String?, clientID: String?, route: String?) -> Google_Protobuf_Struct {
        var fields: [String: Google_Protobuf_Value] = [:]
        if let userID { fields["user_id"] = Google_Protobuf_Value(stringValue: userID) }
        if let tenantID { fields["tenant_id"] = Google_Protobuf_Value(stringValue: tenantID) }
        if let clientID { fields["client_id"] = Google_Protobuf_Value(stringValue: clientID) }
        if let route { fields["route"] = Google_Protobuf_Value(stringValue: route) }
        return Google_Protobuf_Struct(fields: fields)
    }
}
