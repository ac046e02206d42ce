import GRDB
import Traces

extension SQLiteStateSurface {
    /// `value` read from a snapshot of the file: a span of its own (`store <method>`) when the
    /// request this task serves is traced (`CallSpans`), named for the calling store method.
    func read<T: Sendable>(_ function: String = #function, _ value: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await CallSpans.store(.sqlite, function) { try await pool.read(value) }
    }

    /// `updates` in one write transaction, traced as `read` is.
    func write<T: Sendable>(_ function: String = #function, _ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await CallSpans.store(.sqlite, function) { try await pool.write(updates) }
    }
}
