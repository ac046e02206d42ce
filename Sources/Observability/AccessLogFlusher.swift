import ServiceLifecycle

/// Writes the buffered access log every `interval` and once more when the gateway stops.
///
/// Started first among the gateway's services, so it stops last: the final flush comes
/// after the listeners have stopped answering.
public struct AccessLogFlusher: Service {
    package let sink: BufferedLogSink
    package let interval: Duration

    public init(sink: BufferedLogSink, interval: Duration = .seconds(1)) {
        self.sink = sink
        self.interval = interval
    }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            sink.flush()
        }
        sink.flush()
    }
}
