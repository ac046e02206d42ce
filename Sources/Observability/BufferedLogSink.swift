import Foundation
import NIOPosix
import Synchronization

/// A log sink that gathers lines in one buffer per thread and writes each buffer in one
/// `write(2)` when it fills, when `flush()` is called (on a short timer, `AccessLogFlusher`)
/// and at shutdown: the access log's counterpart of nginx's `access_log ... buffer=64k`.
///
/// Lines are never dropped: a full buffer is written by the thread that filled it, and
/// `flush()` writes every thread's buffer. Lines from one thread keep their order; lines
/// from different threads interleave by buffer, as nginx's workers' do. What a `kill -9`
/// interrupts is lost with the process, as in nginx; a graceful stop flushes first.
public final class BufferedLogSink: LogSink, Sendable {
    /// One thread's pending lines.
    private final class Pending: Sendable {
        let bytes = Mutex<[UInt8]>([])
    }

    /// The size at which a thread's buffer is written without waiting for the timer.
    public let capacity: Int
    private let output: @Sendable ([UInt8]) -> Void
    private let current = ThreadSpecificVariable<Pending>()
    private let all = Mutex<[Pending]>([])

    /// - Parameters:
    ///   - capacity: bytes gathered per thread before a write (64 KiB, as nginx's `buffer=64k`).
    ///   - output: where a batch goes; standard error by default.
    public init(capacity: Int = 64 * 1024, output: @escaping @Sendable ([UInt8]) -> Void = BufferedLogSink.standardError) {
        self.capacity = capacity
        self.output = output
    }

    public func write(_ line: String) {
        writeLine { $0.append(contentsOf: line.utf8) }
    }

    /// Appends the line straight to this thread's buffer: nothing is allocated for it.
    public func writeLine(_ build: (inout [UInt8]) -> Void) {
        let pending = pendingForThisThread()
        let full = pending.bytes.withLock { bytes -> [UInt8]? in
            build(&bytes)
            bytes.append(0x0A)
            guard bytes.count >= capacity else { return nil }
            defer { bytes.removeAll(keepingCapacity: true) }
            return bytes
        }
        if let full { output(full) }
    }

    /// Writes every thread's pending lines.
    public func flush() {
        for pending in all.withLock({ $0 }) {
            let batch = pending.bytes.withLock { bytes -> [UInt8] in
                defer { bytes.removeAll(keepingCapacity: true) }
                return bytes
            }
            if !batch.isEmpty { output(batch) }
        }
    }

    private func pendingForThisThread() -> Pending {
        if let pending = current.currentValue { return pending }
        let pending = Pending()
        current.currentValue = pending
        all.withLock { $0.append(pending) }
        return pending
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
