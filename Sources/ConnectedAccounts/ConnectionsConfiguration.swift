import ConfigurationReading

/// `connections`: the services people connect once, the gateway their OAuth client at each. It
/// reads itself.
public struct ConnectionsConfiguration: Sendable, Equatable {
    /// In configuration order, names unique.
    public var connections: [ConnectionSettings] = []

    public init(connections: [ConnectionSettings] = []) {
        self.connections = connections
    }

    /// - Throws: `ConfigurationError` naming `connections[N].KEY`; two entries with one name.
    public init(reading values: ConfigurationValues) throws(ConfigurationError) {
        guard let entries = values.mapList("connections") else { return }
        for entry in entries {
            let connection = try ConnectionSettings(reading: entry)
            guard !connections.contains(where: { $0.name == connection.name }) else {
                throw entry.problem("name", "is \(connection.name), which an earlier connection has too")
            }
            connections.append(connection)
        }
    }

    /// The connection named `name`.
    public func connection(named name: String) -> ConnectionSettings? {
        connections.first { $0.name == name }
    }
}
