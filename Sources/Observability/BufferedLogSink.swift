import Foundation
import Synchronization

/// A log sink that gathers lines in one buffer and writes it in one `write(2)` when it fills,
/// when `flush()` is called (on a short timer, `AccessLogFlusher`) and at shutdown: the access
/// log's counterpart of nginx's `access_log ... buffer=64k`.
///
/// Lines are written in the order they were appended, from every thread: an access line is
/// appended when its request completes, so the log reads in completion order (per-thread
/// buffers, as nginx's workers have, interleaved whole buffers, and a reader saw a request's
/// line before the one that finished first). Lines are never dropped: a full buffer goes into
/// an ordered queue of batches, and whoever writes drains the queue in order, one writer at a
/// time. What a `kill -9` interrupts is lost with the process, as in nginx; a graceful stop
/// flushes first.
public final class BufferedLogSink: LogSink, Sendable {
    /// The lines not yet written: the buffer being filled, and full ones waiting in order.
    private struct Pending {
        var bytes: [UInt8] = []
        var full: [[UInt8]] = []
    }

    /// The size at which the buffer is written without waiting for the timer.
    public let capacity: Int
    private let output: @Sendable ([UInt8]) -> Void
    private let pending = Mutex(Pending())
    /// Held while batches are written, so that two writers cannot reorder them.
    private let writing = Mutex(())

    /// - Parameters:
    ///   - capacity: bytes gathered before a write (64 KiB, as nginx's `buffer=64k`).
    ///   - output: where a batch goes; standard error by default.
    public init(capacity: Int = 64 * 1024, output: @escaping @Sendable ([UInt8]) -> Void = BufferedLogSink.standardError) {
        self.capacity = capacity
        self.output = output
    }

    public func write(_ line: String) {
        writeLine { $0.append(contentsOf: line.utf8) }
    }

    /// Appends the line straight to the buffer: nothing is allocated for it.
    public func writeLine(_ build: (inout [UInt8]) -> Void) {
        let filled = pending.withLock { pending -> Bool in
            build(&pending.bytes)
            pending.bytes.append(0x0A)
            guard pending.bytes.count >= capacity else { return false }
            pending.full.append(pending.bytes)
            pending.bytes = []
            pending.bytes.reserveCapacity(capacity + 512)
            return true
        }
        if filled { drain() }
    }

    /// Writes every pending line.
    public func flush() {
        pending.withLock { pending in
            guard !pending.bytes.isEmpty else { return }
            pending.full.append(pending.bytes)
            pending.bytes.removeAll(keepingCapacity: true)
        }
        drain(waiting: true)  // everything is out when flush returns (at shutdown, above all)
    }

    /// Writes the queued batches, oldest first; one writer at a time.
    ///
    /// A thread that finds another writing leaves its batch to it (that writer empties the queue
    /// before it lets go) rather than wait: an event loop never blocks behind another's `write(2)`.
    /// A batch queued just as the writer let go waits for the next flush (within a second).
    private func drain(waiting: Bool = false) {
        if waiting {
            writing.withLock { _ in writeQueued() }
        } else {
            _ = writing.withLockIfAvailable { _ in writeQueued() }
        }
    }

    /// Writes and removes the queued batches in order (`writing` held).
    private func writeQueued() {
        while let batch = pending.withLock({ $0.full.isEmpty ? nil : $0.full.removeFirst() }) {
            output(batch)
        }
    }

    /// Writes a batch to standard error, all of it (a pipe may take it in parts).
    public static let standardError: @Sendable ([UInt8]) -> Void = { batch in
        batch.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            var offset = 0
            while offset < raw.count {
                let written = Foundation.write(2, base + offset, raw.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return  // standard error is gone: nothing else can report it
                }
            }
        }
    }
}
