import DataPlane
import EdgeHTTP
import EnvoyAuthProtos
import Foundation
import NIOCore
import NIOHTTP1
import SwiftProtobuf
import Synchronization
import Traces
import X509

/// `envoy.service.auth.v3.Authorization/Check` decided, for every connection of the gRPC
/// listener: the data plane's `AccessDecision`, made on the connection's own event loop (no hop),
/// its verdict in Envoy's messages.
///
/// The original request is read from `attributes.request.http`, the client's address from
/// `attributes.source`.
final class ExtAuthzGRPCChecks: Sendable {
    static let callerRefused = GatewayError(
        .forbidden, "ext_authz_caller_refused", "ext_authz answers only the addresses ext_authz.callers lists; add this Envoy's address there")
    static let callerCertificateRefused = GatewayError(
        .forbidden, "ext_authz_caller_refused",
        "ext_authz answers only callers whose certificate names one of ext_authz.tls.caller_names and is within its dates; add this Envoy's SPIFFE ID or DNS name there, or renew its certificate")
    /// The metric and access log's name for these decisions.
    static let endpoint = "ext_authz (gRPC)"

    let plane: DataPlane
    let configuration: ExtAuthzConfiguration
    let requestIDs: Mutex<ConnectionRequestIDs>
    let removals = ExtAuthzRemovalLists()

    init(plane: DataPlane, configuration: ExtAuthzConfiguration) {
        self.plane = plane
        self.configuration = configuration
        self.requestIDs = Mutex(ConnectionRequestIDs())
    }

    /// The answer to a caller that may not ask (`byAddress`: its address is not in
    /// `ext_authz.callers`; else its certificate names no caller): a denial, logged, never an RPC
    /// error, which an Envoy with `failure_mode_allow` would let the request through on.
    func refusal(byAddress: Bool, peer: String?, certificate: Certificate?) -> Envoy_Service_Auth_V3_CheckResponse {
        let requestID = requestIDs.withLock { $0.next() }
        plane.logger.notice(
            byAddress ? "ext_authz refused a check: its address is not in ext_authz.callers" : "ext_authz refused a check: its certificate names none of ext_authz.tls.caller_names, or is outside its dates",
            metadata: ["peer": "\(peer ?? "unknown")", "listener": "grpc", "names": "\(certificate.map(ExtAuthzCallerNames.names(in:)) ?? [])"])
        let denial = ExtAuthzDenial(byAddress ? Self.callerRefused : Self.callerCertificateRefused, signIn: nil, requestID: requestID)
        return Self.denied(denial, code: 7, caller: nil)
    }

    /// One check, decided on `loop` (the caller's connection's); `answer` is called on it, once,
    /// at once when nothing needs a store (a cached token), else when the store has answered.
    func check(
        _ request: Envoy_Service_Auth_V3_CheckRequest, peer: String?, askerTrace: TraceContextFields, on loop: any EventLoop,
        answer: @escaping (Envoy_Service_Auth_V3_CheckResponse) -> Void
    ) {
        let (plane, removals, requestID) = (plane, removals, requestIDs.withLock { $0.next() })
        let started = ContinuousClock.now
        let http = request.attributes.request.http
        let headers = Self.headers(of: http)
        let source = request.attributes.source.address.socketAddress.address
        let client = plane.clientAddress(peer: source.isEmpty ? peer : source, forwardedFor: [])
        let finish: (Envoy_Service_Auth_V3_CheckResponse, Int, AccessDecision?) -> Void = { response, status, decision in
            plane.recordDecision(
                endpoint: Self.endpoint, requestID: requestID, method: AccessQuestion.metricLabel(http.method), status: status, nanoseconds: (ContinuousClock.now - started).nanoseconds,
                protocol: "gRPC", userID: decision?.userID, userName: decision?.userName)
            answer(response)
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
        ok.headers = upstream.set.map { headerOption(name: $0.name, value: $0.value) }
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
        denied.headers = denial.fields.map { headerOption(name: $0.name, value: $0.value) }
        denied.body = String(decoding: denial.body, as: UTF8.self)
        var response = Envoy_Service_Auth_V3_CheckResponse()
        response.status.code = Int32(code)
        response.deniedResponse = denied
        if let caller { response.dynamicMetadata = metadata(userID: caller.userID, tenantID: nil, clientID: nil, route: caller.route) }
        return response
    }

    /// A field Envoy sets on the request (allowed) or the client's answer (denied), replacing any of its name.
    static func headerOption(name: String, value: String) -> Envoy_Config_Core_V3_HeaderValueOption {
        var option = Envoy_Config_Core_V3_HeaderValueOption()
        option.header.key = name
        option.header.value = value
        option.appendAction = .overwriteIfExistsOrAdd
        return option
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
