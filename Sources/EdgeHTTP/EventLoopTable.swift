import NIOConcurrencyHelpers
import NIOCore

/// One value per event loop, made on first use: the upstream pools, the agent
/// links and the socket deadline tables, each confined to its loop.
///
/// The value is bound to its loop (`NIOLoopBound`): ask for it on that loop.
package final class EventLoopTable<Value>: Sendable {
    private let values = NIOLockedValueBox<[ObjectIdentifier: NIOLoopBound<Value>]>([:])

    package init() {}

    /// The value of `eventLoop`, made by `make` the first time (call it on that loop).
    package func value(for eventLoop: any EventLoop, make: () -> Value) -> Value {
        values.withLockedValue { values in
            if let value = values[ObjectIdentifier(eventLoop)] { return value.value }
            let value = make()
            values[ObjectIdentifier(eventLoop)] = NIOLoopBound(value, eventLoop: eventLoop)
            return value
        }
    }
}
