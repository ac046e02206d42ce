import Logging
import NIOCore
import NIOSSL
import NIOTLS
import X509

/// On either listener under `ext_authz.tls`, just after the TLS handler: lets a connection's
/// bytes through only once its handshake is done, and closes it when the handshake takes longer
/// than `handshakeTimeout` (a caller that never finishes holds nothing for long).
///
/// On the HTTP listener (`refusal: .closes`) a caller whose certificate names none of
/// `caller_names` is closed on after the handshake. On the gRPC listener (`.perCall`) it is let
/// through, and its certificate passed on (`ExtAuthzCallerCertificate`) for each check to be
/// denied in Envoy's terms: an Envoy whose connection fails may fail open.
final class ExtAuthzCallerCertificateGate: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let handshakeTimeout = TimeAmount.seconds(10)

    /// What becomes of a caller whose certificate names none of `caller_names`.
    enum Refusal {
        /// Closed after the handshake (HTTP: no answer could say why in Envoy's terms per request).
        case closes
        /// Let through; each check reads `ExtAuthzCallerCertificate` and is denied (gRPC).
        case perCall
    }

    private let configuration: ExtAuthzConfiguration
    private let logger: Logger
    private let refusal: Refusal
    /// The listener's name in the log (`http`, `grpc`).
    private var listener: String { refusal == .closes ? "http" : "grpc" }
    private var admitted = false
    private var timeout: Scheduled<Void>?

    init(configuration: ExtAuthzConfiguration, logger: Logger, refusal: Refusal = .closes) {
        self.configuration = configuration
        self.logger = logger
        self.refusal = refusal
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startTimeout(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startTimeout(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        timeout?.cancel()
        timeout = nil
        context.fireChannelInactive()
    }

    private func startTimeout(context: ChannelHandlerContext) {
        guard timeout == nil, !admitted else { return }
        timeout = context.eventLoop.assumeIsolated().scheduleTask(in: Self.handshakeTimeout) { [weak self] in
            guard let self, !self.admitted else { return }
            context.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tlsEvent = event as? TLSUserEvent, case .handshakeCompleted = tlsEvent {
            timeout?.cancel()
            timeout = nil
            let peer = context.channel.remoteAddress?.ipAddress
            let certificate = (try? context.pipeline.syncOperations.nioSSL_peerCertificate()).flatMap { $0 }.flatMap { try? Certificate(derEncoded: $0.toDERBytes()) }
            if refusal == .perCall {
                admitted = true
                context.fireUserInboundEventTriggered(ExtAuthzCallerCertificate(certificate: certificate))
                return context.fireUserInboundEventTriggered(event)
            }
            guard configuration.admits(certificate: certificate) else {
                logger.notice(
                    "ext_authz refused a connection: its certificate names none of ext_authz.tls.caller_names, or is outside its dates",
                    metadata: ["peer": "\(peer ?? "unknown")", "listener": "\(listener)", "names": "\(certificate.map(ExtAuthzCallerNames.names(in:)) ?? [])"])
                context.close(promise: nil)
                return
            }
            admitted = true
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Nothing before the caller is known: TLS hands up no data before its handshake completes,
        // so this is only a guard.
        guard admitted else { return context.close(promise: nil) }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // HTTP/2's preface (the server's SETTINGS) is written as the connection opens: TLS holds it
        // until the handshake is done. Nothing else is written before a caller is admitted.
        guard admitted || refusal == .perCall else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A failed handshake (no certificate, another CA's, not TLS at all): closed, without an answer.
        if !admitted {
            logger.debug("ext_authz closed a connection whose TLS handshake failed", metadata: ["error": "\(error)", "listener": "\(listener)"])
            return context.close(promise: nil)
        }
        context.fireErrorCaught(error)
    }
}
