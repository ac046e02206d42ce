import Logging
import NIOCore
import NIOSSL
import NIOTLS
import X509

/// On the HTTP listener under `ext_authz.tls`, just after the TLS handler: lets a connection's
/// bytes through only once its handshake is done and the caller's certificate names one of
/// `caller_names`; closes it otherwise, and when the handshake takes longer than
/// `handshakeTimeout` (a caller that never finishes holds nothing for long).
final class ExtAuthzCallerCertificateGate: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let handshakeTimeout = TimeAmount.seconds(10)

    private let configuration: ExtAuthzConfiguration
    private let logger: Logger
    private var admitted = false
    private var timeout: Scheduled<Void>?

    init(configuration: ExtAuthzConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
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
            guard configuration.admits(certificate: certificate) else {
                logger.notice(
                    "ext_authz refused a connection: its certificate names none of ext_authz.tls.caller_names, or is outside its dates",
                    metadata: ["peer": "\(peer ?? "unknown")", "listener": "http", "names": "\(certificate.map(ExtAuthzCallerNames.names(in:)) ?? [])"])
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
        guard admitted else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A failed handshake (no certificate, another CA's, not TLS at all): closed, without an answer.
        if !admitted {
            logger.debug("ext_authz closed a connection whose TLS handshake failed", metadata: ["error": "\(error)", "listener": "http"])
            return context.close(promise: nil)
        }
        context.fireErrorCaught(error)
    }
}
