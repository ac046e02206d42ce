/// A problem found while starting: names the configuration key.
public struct GatewayStartupError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
