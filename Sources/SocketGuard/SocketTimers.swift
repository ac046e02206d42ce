import DataPlane
import NIOCore

/// The deadlines of one event loop's agent sockets (token expiry, the idle
/// ping, the close grace), checked by one repeating task per loop.
///
/// A scheduled task per socket would cost little to add, but NIO finds a
/// task to cancel by a linear search of its heap: 20,000 sockets closing at
/// once (a logout) cancelled in O(n^2). Here a deadline is a bucket of 100 ms:
/// setting, moving or dropping one is a dictionary operation, and the loop
/// wakes ten times a second only while it has sockets.
package final class SocketTimers {
    /// The granularity of every deadline.
    static let tick = TimeAmount.milliseconds(100)

    let eventLoop: any EventLoop
    private var buckets: [Int64: [ObjectIdentifier: AgentSocketHandler]] = [:]
    private var due: [ObjectIdentifier: Int64] = [:]
    private var lastTick: Int64
    /// The loop's next tick, while it has sockets waiting.
    private var task: Scheduled<Void>?

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        lastTick = Self.tickNumber(.now())
    }

    static func tickNumber(_ deadline: NIODeadline) -> Int64 {
        deadline.uptimeNanoseconds.quotientAndRemainder(dividingBy: UInt64(tick.nanoseconds)).quotient.clampedToInt64
    }

    /// Calls `socket.deadlineReached()` at `deadline` (at most a tick late), replacing its earlier deadline.
    func schedule(_ socket: AgentSocketHandler, at deadline: NIODeadline) {
        cancel(socket)
        // Nothing is waiting while the task is stopped: the table can skip to now.
        if task == nil { lastTick = Self.tickNumber(.now()) }
        // A deadline that has passed already fires at the next tick.
        let number = max(Self.tickNumber(deadline) + 1, lastTick + 1)
        buckets[number, default: [:]][ObjectIdentifier(socket)] = socket
        due[ObjectIdentifier(socket)] = number
        if task == nil { scheduleTick() }
    }

    /// Drops the socket's deadline, if it has one.
    func cancel(_ socket: AgentSocketHandler) {
        guard let number = due.removeValue(forKey: ObjectIdentifier(socket)) else { return }
        buckets[number]?[ObjectIdentifier(socket)] = nil
        if buckets[number]?.isEmpty == true { buckets[number] = nil }
    }

    private func scheduleTick() {
        task = eventLoop.assumeIsolated().scheduleTask(in: Self.tick) { [self] in fire() }
    }

    private func fire() {
        // `task` stays set while the sockets run: a socket that sets a new deadline must not restart the table.
        let now = Self.tickNumber(.now())
        while lastTick < now {
            lastTick += 1
            guard let sockets = buckets.removeValue(forKey: lastTick) else { continue }
            for (id, socket) in sockets {
                due[id] = nil
                socket.deadlineReached()
            }
        }
        task = nil
        if !due.isEmpty { scheduleTick() }
    }
}

extension UInt64 {
    fileprivate var clampedToInt64: Int64 { self > UInt64(Int64.max) ? .max : Int64(self) }
}
