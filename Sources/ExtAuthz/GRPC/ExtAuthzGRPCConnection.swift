import DataPlane
import EdgeHTTP
import EnvoyAuthProtos
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import SwiftProtobuf
import Traces
import X509

/// Serves one connection of the gRPC listener on its event loop: each stream a unary call read
/// from its `HEADERS` and `DATA` frames, decided on the same loop, answered as `HEADERS`, one
/// `DATA` and trailers. No stream channel and no task per call.
///
/// Last in the connection's pipeline, after swift-nio-http2's connection handler (which keeps
/// HTTP/2's rules: stream states, HPACK, the header list's size, resets) and the connection's
/// management (idle time, age, graceful stop). A call is refused as early as it can be told:
/// a method other than `POST` (405), not gRPC (415), a method not served (`UNIMPLEMENTED`), and a
/// caller that may not ask (a denial) before a byte of its message is kept.
final class ExtAuthzGRPCConnection: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    static let checkPath = "/envoy.service.auth.v3.Authorization/Check"
    static let healthPath = "/grpc.health.v1.Health/Check"
    /// The services the health service answers `SERVING` for: the server (`""`) and the one it serves.
    static let servedServices: Set<String> = ["", "envoy.service.auth.v3.Authorization"]
    /// A stream's inbound window, kept up while its message arrives (HTTP/2's default).
    static let streamWindow = 65_535
    /// What one connection's unfinished calls may hold at once: four messages of the largest size.
    static let maximumHeldBytes = 4 * (ExtAuthzGRPCCall.maximumMessageBytes + 5)

    private static let answerHead = HPACKHeaders([(":status", "200"), ("content-type", "application/grpc")])
    private static let okTrailers = HPACKHeaders([("grpc-status", "0")])

    private let checks: ExtAuthzGRPCChecks
    private var context: ChannelHandlerContext?
    /// The calls open on this connection, until swift-nio-http2 reports each stream closed.
    private var calls: [HTTP2StreamID: ExtAuthzGRPCCall] = [:]
    /// The highest stream id opened so far: a client's streams open in increasing order (RFC 9113
    /// §5.1.1, enforced by swift-nio-http2), so a `HEADERS` above it opens a call, any other ends one.
    private var lastOpened = HTTP2StreamID.rootStream
    private var peer: String?
    private var peerAdmitted = false
    /// The caller's certificate under `ext_authz.tls` (`ExtAuthzCallerCertificate`), checked at each call.
    private var certificate: Certificate?
    /// The bytes the calls in `calls` hold (`ExtAuthzGRPCCall.heldBytes`), at most `maximumHeldBytes`.
    private var heldBytes = 0
    /// The one timer for every call's `deadline`, armed for the earliest.
    private var deadlineCheck: Scheduled<Void>?
    private var deadlineCheckAt: NIODeadline?
    /// Inside a read: answers made now are flushed once, when the read completes.
    private var reading = false
    private var flushDue = false
    /// A read asked for while the socket could not take more: done once it can (a caller that
    /// sends calls and never reads its answers stops being read).
    private var readHeld = false

    init(checks: ExtAuthzGRPCChecks) {
        self.checks = checks
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        peer = context.channel.remoteAddress?.ipAddress
        peerAdmitted = checks.configuration.admits(peer)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        closeAll()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reading = true
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            if frame.streamID > lastOpened {
                lastOpened = frame.streamID
                open(frame.streamID, headers: headers.headers, ended: headers.endStream)
            } else if headers.endStream {
                complete(frame.streamID)  // trailers: the request ends
            }
        case .data(let data):
            received(data, on: frame.streamID)
        default:
            break  // the connection's frames are swift-nio-http2's; a reset's close arrives as StreamClosedEvent
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        if flushDue {
            flushDue = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let closed as StreamClosedEvent:
            if let call = calls.removeValue(forKey: closed.streamID) { heldBytes -= call.heldBytes }
        case let window as NIOHTTP2WindowUpdatedEvent where window.streamID != .rootStream:
            // A call's window, back up as its message arrives (a message may be larger than one window).
            guard let state = calls[window.streamID]?.state, state == .receiving || state == .draining, let size = window.inboundWindowSize,
                let increment = HTTP2ConnectionWindow.increment(window: size, target: Self.streamWindow)
            else { return }
            context.write(wrapOutboundOut(HTTP2Frame(streamID: window.streamID, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
            flush(context)
            return
        case let caller as ExtAuthzCallerCertificate:
            certificate = caller.certificate
            return
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    func read(context: ChannelHandlerContext) {
        guard context.channel.isWritable else {
            readHeld = true
            return
        }
        context.read()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if readHeld, context.channel.isWritable {
            readHeld = false
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeAll()
        context.fireChannelInactive()
    }

    private func closeAll() {
        deadlineCheck?.cancel()
        deadlineCheck = nil
        deadlineCheckAt = nil
        calls.removeAll()
        heldBytes = 0
    }

    // MARK: - A call's frames

    /// A stream's opening `HEADERS`: refused at once (and drained when its request goes on), or
    /// a call that waits for its message.
    private func open(_ id: HTTP2StreamID, headers: HPACKHeaders, ended: Bool) {
        var method: String?
        var path: String?
        var contentType: String?
        var traceparents: [String] = []
        var tracestates: [String] = []
        for (name, value, _) in headers {
            switch name {
            case ":method": method = value
            case ":path": path = value
            case "content-type": contentType = value
            case "traceparent": traceparents.append(value)
            case "tracestate": tracestates.append(value)
            default: continue
            }
        }
        guard method == "POST" else { return refuse(id, ended: ended) { answer(id, httpStatus: "405", requestEnded: ended) } }
        guard Self.isGRPCProto(contentType) else { return refuse(id, ended: ended) { answer(id, httpStatus: "415", requestEnded: ended) } }
        let called: ExtAuthzGRPCCall.Method
        switch path {
        case Self.checkPath: called = .check
        case Self.healthPath: called = .health
        default: return refuse(id, ended: ended) { answer(id, failure: .unknownMethod(path ?? ""), requestEnded: ended) }
        }
        // Only the Envoys may ask, checked before the message is read.
        if called == .check, !(peerAdmitted && checks.configuration.admits(certificate: certificate)) {
            let refusal = checks.refusal(byAddress: !peerAdmitted, peer: peer, certificate: certificate)
            return refuse(id, ended: ended) { answer(id, message: refusal, requestEnded: ended) }
        }
        let askerTrace = called == .check && !traceparents.isEmpty ? TraceContextFields.screened(traceparents: traceparents, tracestates: tracestates) : TraceContextFields()
        let deadline = NIODeadline.now() + ExtAuthzGRPCCall.receiveTimeout
        calls[id] = ExtAuthzGRPCCall(method: called, askerTrace: askerTrace, deadline: deadline)
        if ended {
            complete(id)
        } else {
            watchDeadline(deadline)
        }
    }

    /// A call refused at its `HEADERS`: kept (before `answer` writes, so that the stream's close
    /// finds it) until its stream closes, draining what its request still sends for
    /// `receiveTimeout`, or, when the request has ended, for the answer to close within `closeTimeout`.
    private func refuse(_ id: HTTP2StreamID, ended: Bool, answer: () -> Void) {
        let deadline = NIODeadline.now() + (ended ? ExtAuthzGRPCCall.closeTimeout : ExtAuthzGRPCCall.receiveTimeout)
        calls[id] = .refused(state: ended ? .answered : .draining, deadline: deadline)
        watchDeadline(deadline)
        answer()
    }

    private func received(_ data: HTTP2Frame.FramePayload.Data, on id: HTTP2StreamID) {
        guard let state = calls[id]?.state, case .byteBuffer(var bytes) = data.data else { return }
        if state == .draining {
            // Dropped (padding counted: its window is given back too); a refused call that goes on
            // past what it may still send is reset.
            if calls[id]?.drop(bytes.readableBytes + (data.paddingBytes ?? 0)) == false, !data.endStream { reset(id) }
            return
        }
        guard state == .receiving else { return }
        let before = calls[id]?.heldBytes ?? 0
        do throws(ExtAuthzGRPCFailure) {
            guard heldBytes + bytes.readableBytes <= Self.maximumHeldBytes else { throw .connectionFull }
            try calls[id]?.append(&bytes)
        } catch {
            calls[id]?.release()
            heldBytes -= before
            markAnswered(id)
            return answer(id, failure: error, requestEnded: data.endStream)
        }
        heldBytes += (calls[id]?.heldBytes ?? 0) - before
        if data.endStream { complete(id) }
    }

    /// The request has ended: its message decoded and answered.
    private func complete(_ id: HTTP2StreamID) {
        guard var call = calls[id], call.state == .receiving, let context else { return }
        calls[id] = nil  // the buffer held by one copy only
        heldBytes -= call.heldBytes
        call.state = .deciding
        let taken = Result { () throws(ExtAuthzGRPCFailure) in try call.takeMessage() }
        calls[id] = call
        let bytes: [UInt8]
        switch taken {
        case .success(let message): bytes = message
        case .failure(let error): return settle(id, failure: error)
        }
        switch call.method {
        case .health:
            guard let request = try? Grpc_Health_V1_HealthCheckRequest(serializedBytes: bytes) else { return settle(id, failure: .notHealthRequest) }
            guard Self.servedServices.contains(request.service) else { return settle(id, failure: .unknownService(request.service)) }
            var health = Grpc_Health_V1_HealthCheckResponse()
            health.status = .serving
            settle(id, message: health)
        case .check:
            guard let request = try? Envoy_Service_Auth_V3_CheckRequest(serializedBytes: bytes) else { return settle(id, failure: .notCheckRequest) }
            checks.check(request, peer: peer, askerTrace: call.askerTrace, on: context.eventLoop) { [weak self] response in
                self?.settle(id, message: response)
            }
        }
    }

    // MARK: - Answers

    /// A call's answer, made once its request ended: dropped when its stream was reset meanwhile.
    private func settle(_ id: HTTP2StreamID, message: some SwiftProtobuf.Message) {
        guard calls[id]?.state == .deciding else { return }
        markAnswered(id)
        answer(id, message: message, requestEnded: true)
    }

    private func settle(_ id: HTTP2StreamID, failure: ExtAuthzGRPCFailure) {
        guard calls[id]?.state == .deciding else { return }
        markAnswered(id)
        answer(id, failure: failure, requestEnded: true)
    }

    /// `HEADERS`, the message as one length-prefixed `DATA` frame, and trailers with status OK.
    private func answer(_ id: HTTP2StreamID, message: some SwiftProtobuf.Message, requestEnded: Bool) {
        guard let context else { return }
        let bytes: [UInt8]
        do {
            bytes = try message.serializedBytes()
        } catch {
            return answer(id, failure: ExtAuthzGRPCFailure(status: 13, message: "the answer could not be encoded"), requestEnded: requestEnded)
        }
        var buffer = context.channel.allocator.buffer(capacity: bytes.count + 5)
        buffer.writeInteger(UInt8(0))
        buffer.writeInteger(UInt32(bytes.count))
        buffer.writeBytes(bytes)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: Self.answerHead)))), promise: nil)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(buffer))))), promise: nil)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: Self.okTrailers, endStream: true)))), promise: nil)
        ended(id, requestEnded: requestEnded, context: context)
    }

    /// A trailers-only answer: one `HEADERS` frame with the status and its message.
    private func answer(_ id: HTTP2StreamID, failure: ExtAuthzGRPCFailure, requestEnded: Bool) {
        guard let context else { return }
        let headers = HPACKHeaders([
            (":status", "200"), ("content-type", "application/grpc"), ("grpc-status", String(failure.status)),
            ("grpc-message", GRPCRequest.percentEncoded(failure.message)), ("grpc-accept-encoding", "identity"),
        ])
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: true)))), promise: nil)
        ended(id, requestEnded: requestEnded, context: context, resetting: failure.status == 8 || failure.status == 4)
    }

    /// An HTTP status with no body, for a request that is not a gRPC call.
    private func answer(_ id: HTTP2StreamID, httpStatus: String, requestEnded: Bool) {
        guard let context else { return }
        var headers = HPACKHeaders([(":status", httpStatus)])
        if httpStatus == "405" { headers.add(name: "allow", value: "POST") }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: true)))), promise: nil)
        ended(id, requestEnded: requestEnded, context: context)
    }

    /// Resets a call's stream (`NO_ERROR`: its request's rest is not wanted).
    private func reset(_ id: HTTP2StreamID) {
        guard let context else { return }
        markAnswered(id)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.noError))), promise: nil)
        flush(context)
    }

    // MARK: - Deadlines

    /// A call answered (before the answer is written, so that its stream's close, which the write
    /// may report at once, finds it): its stream must close within `closeTimeout`.
    private func markAnswered(_ id: HTTP2StreamID) {
        guard calls[id] != nil else { return }
        let deadline = NIODeadline.now() + ExtAuthzGRPCCall.closeTimeout
        calls[id]?.state = .answered
        calls[id]?.deadline = deadline
        watchDeadline(deadline)
    }

    /// Makes sure the deadline check runs by `deadline`.
    private func watchDeadline(_ deadline: NIODeadline) {
        guard let context else { return }
        if let at = deadlineCheckAt, at <= deadline { return }
        deadlineCheck?.cancel()
        deadlineCheckAt = deadline
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        deadlineCheck = context.eventLoop.scheduleTask(deadline: deadline) { loopBound.value.checkDeadlines() }
    }

    /// Ends the calls whose request has not arrived (or, refused, not ended) by their deadline, and
    /// the answered ones whose stream has not closed: a call still receiving is `DEADLINE_EXCEEDED`
    /// and reset, any other reset. A call being decided waits for its decision (bounded by the
    /// store's own timeouts).
    private func checkDeadlines() {
        deadlineCheck = nil
        deadlineCheckAt = nil
        let now = NIODeadline.now()
        var expired: [HTTP2StreamID] = []
        var next: NIODeadline?
        for (id, call) in calls where call.state != .deciding {
            if call.deadline <= now { expired.append(id) } else { next = min(next ?? call.deadline, call.deadline) }
        }
        for id in expired {
            guard let call = calls[id] else { continue }
            if call.state == .receiving {
                heldBytes -= call.heldBytes
                calls[id]?.release()
                markAnswered(id)
                answer(id, failure: .timedOut, requestEnded: false)
            } else {
                // Reset once: a stream NIO has not reported closed after this is dropped here.
                reset(id)
                calls[id] = nil
            }
        }
        if let next { watchDeadline(next) }
    }

    /// After an answer's end: the answer is flushed, once per read when inside one.
    ///
    /// A request still sending is left to end (its frames are dropped here): gRPC's clients read a
    /// reset after the answer, even `NO_ERROR` (RFC 9113 §8.1), as the call failing. Only a call
    /// over the size, or past its deadline, is reset (`resetting`), as what it still sends would
    /// otherwise wait for a window that is never given back.
    private func ended(_ id: HTTP2StreamID, requestEnded: Bool, context: ChannelHandlerContext, resetting: Bool = false) {
        if resetting, !requestEnded { context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.noError))), promise: nil) }
        flush(context)
    }

    private func flush(_ context: ChannelHandlerContext) {
        if reading {
            flushDue = true
        } else {
            context.flush()
        }
    }

    /// `application/grpc` or `application/grpc+proto` (parameters allowed, any case): the only
    /// encodings of these methods' messages.
    static func isGRPCProto(_ value: String?) -> Bool {
        guard let value else { return false }
        if value == "application/grpc" { return true }  // Envoy's: no folding needed (it cost 5% of a check)
        let type = value.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        return type == "application/grpc" || type == "application/grpc+proto"
    }
}
