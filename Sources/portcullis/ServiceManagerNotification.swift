import Foundation
import Logging
import NIOCore
import NIOPosix

/// Tells systemd that the service is ready (`READY=1`), over `$NOTIFY_SOCKET`: sd_notify's protocol.
///
/// The Debian package's unit is `Type=notify`, so `systemctl start` (and `enable --now`) returns
/// once every listener is up, not when the process has merely started. Without `NOTIFY_SOCKET`
/// (not under systemd, or another unit type) it does nothing. Only a socket path is supported
/// (systemd's own is `/run/systemd/notify`); an abstract socket (`@...`) is named in a warning and skipped.
struct ServiceManagerNotification: Sendable {
    /// The socket systemd listens on; `nil` when there is none to tell.
    let socketPath: String?
    let logger: Logger

    init(environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger) {
        self.logger = logger
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else {
            socketPath = nil
            return
        }
        if path.hasPrefix("@") {
            logger.warning("NOTIFY_SOCKET names an abstract socket, which portcullis does not support: systemd is not told it is ready")
            socketPath = nil
        } else {
            socketPath = path
        }
    }

    /// Sends one state line (`READY=1`), within 5 s; a failure is logged, never thrown: the service runs on.
    func send(_ state: String) async {
        guard let socketPath else { return }
        do {
            let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(unixDomainSocketPath: socketPath).get()
            // A datagram socket systemd does not read would hold the write: it is closed after 5 s.
            let timeout = channel.eventLoop.scheduleTask(in: .seconds(5)) { channel.close(promise: nil) }
            defer { timeout.cancel() }
            // Connected: the datagram goes to the socket connected to, however its path was spelled.
            try await channel.writeAndFlush(ByteBuffer(string: state)).get()
            try await channel.close().get()
        } catch {
            logger.warning(
                "could not tell systemd \(state) on NOTIFY_SOCKET (\(error)): a Type=notify unit will be failed at its start timeout")
        }
    }
}

/// Sends `READY=1` once every expected listener has reported itself listening.
actor ReadinessAnnouncement {
    private var waiting: Set<String>
    private let notification: ServiceManagerNotification

    init(listeners: Set<String>, notification: ServiceManagerNotification) {
        self.waiting = listeners
        self.notification = notification
    }

    /// One listener is up; the last one sends `READY=1`, in a task of its own: a listener serves
    /// only once its start-up call returns, which the datagram must not hold.
    func listening(_ listener: String) {
        guard waiting.remove(listener) != nil, waiting.isEmpty else { return }
        let notification = self.notification
        Task { await notification.send("READY=1") }
    }
}
