import Foundation
import Synchronization

/// How the last configuration reload ended, for the admin listener's `/readyz`.
public final class ReloadStatus: Sendable {
    /// One reload's end.
    public struct Outcome: Sendable, Equatable {
        /// Seconds since 1970.
        public let at: Double
        /// `false`: the file was refused whole and the configuration before stays in force.
        public let succeeded: Bool
        /// Why it was refused, naming the key (`nil` when it succeeded).
        public let error: String?
        /// Keys whose new value waits for a restart (ports, storage, the keys directory...).
        public let restartKeys: [String]
    }

    private let outcome = Mutex<Outcome?>(nil)

    public init() {}

    /// The last reload's end; `nil` before the first.
    public var last: Outcome? { outcome.withLock { $0 } }

    func record(succeeded: Bool, error: String? = nil, restartKeys: [String] = []) {
        let ended = Outcome(at: Date().timeIntervalSince1970, succeeded: succeeded, error: error, restartKeys: restartKeys)
        outcome.withLock { $0 = ended }
    }
}
