import NIOCore
import NIOPosix

/// Tries each listener's address before anything starts, so that a port already in use is one
/// line naming the listener, its address and the setting to change, and nothing was created.
///
/// Started with the port taken, the services' group would cancel every other service after the
/// listener failed, each saying so (a burst of `CancellationError` lines) and the bind's own
/// error last and unlabelled. A listener on port 0 (any free port) is not tried. The check and
/// the real bind are moments apart: a program taking the port between them still fails the
/// start, as before, with the bind's error.
struct ListenerPortCheck {
    /// One listener: its name in messages, the setting and environment variable of its port.
    struct Listener {
        let name: String
        let key: String
        let variable: String
        let host: String
        let port: Int
    }

    /// - Throws: `CLIError` naming the first listener whose address cannot be bound.
    static func check(_ listeners: [Listener]) async throws {
        for listener in listeners where listener.port != 0 {
            do {
                let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .bind(host: listener.host, port: listener.port).get()
                try await channel.close()
            } catch let error as IOError where error.errnoCode == EADDRINUSE {
                throw CLIError(
                    "the \(listener.name) cannot listen on \(listener.host):\(listener.port): the port is in use (another portcullis, or another program); stop that, or set \(listener.key) (\(listener.variable)) to a free port")
            } catch let error as IOError where error.errnoCode == EACCES {
                throw CLIError(
                    "the \(listener.name) may not listen on \(listener.host):\(listener.port) (ports below 1024 need privileges); set \(listener.key) (\(listener.variable)) to 1024 or above")
            } catch let error as IOError where error.errnoCode == EADDRNOTAVAIL {
                throw CLIError("the \(listener.name) cannot listen on \(listener.host): no interface of this machine has that address; correct the host setting")
            }
        }
    }
}
