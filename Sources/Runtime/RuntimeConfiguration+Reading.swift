import ConfigurationReading

extension RuntimeConfiguration {
    /// Reads the Runtime's keys (`runtime.*`, `gateway.issuer` as the assertion
    /// issuer, `contracts.anonymous_intents`) on top of the defaults declared above.
    ///
    /// - Throws: `ConfigurationError` naming the first key whose value cannot be used.
    public init(reading values: ConfigurationValues) throws(ConfigurationError) {
        var configuration = RuntimeConfiguration()
        if let value = try values.string("runtime.host") { configuration.host = value }
        if let value = try values.int("runtime.port", in: 0...65_535) { configuration.port = value }
        if let value = try values.string("runtime.name") { configuration.name = value }
        if let issuer = try GatewayIssuer.read(values) { configuration.assertionIssuer = issuer.url }
        if let value = try values.seconds("runtime.anonymous_idle_timeout_seconds") { configuration.anonymousIdleTimeout = value }
        if let value = try values.seconds("runtime.authenticated_idle_timeout_seconds") { configuration.authenticatedIdleTimeout = value }
        if let value = try values.seconds("runtime.authenticated_lifetime_seconds") { configuration.authenticatedLifetime = value }
        if let value = try values.seconds("runtime.sweep_interval_seconds") { configuration.sweepInterval = value }
        if let value = try values.int("runtime.max_message_bytes", in: 1_024...(16 << 20)) { configuration.maximumMessageBytes = value }
        if let value = try values.int("runtime.max_metadata_bytes", in: 2...(1 << 20)) { configuration.maximumMetadataBytes = value }
        if let value = try values.strings("contracts.anonymous_intents") { configuration.anonymousIntents = Set(value) }
        self = configuration
    }
}
