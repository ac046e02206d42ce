/// Whether the request head NIO's decoder just read asked to become a WebSocket on a route.
///
/// `UpgradeOfferScreen` says so (it takes `Upgrade` off the head, so that NIO's upgrade handler,
/// which performs only the agent socket's upgrade, lets the request pass), and
/// `ProxyChannelHandler` takes it when it starts that request's exchange: the flag never comes
/// from the request's own fields, which a client could set on any request. One per connection,
/// made by its channel initializer and used on its event loop only.
package final class RouteUpgradeOffer: @unchecked Sendable {
    /// Read and written on the connection's event loop only (both handlers live there).
    private var asked = false

    package init() {}

    /// The head passing now asked for a WebSocket on a route.
    package func offer() { asked = true }

    /// Whether the head being started asked; cleared, so that it counts for that head alone.
    func take() -> Bool {
        defer { asked = false }
        return asked
    }
}
