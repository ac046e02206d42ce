import Foundation
import Synchronization

/// How this instance's last provider re-checks went, by provider: what the admin `/readyz` shows
/// while a provider cannot be asked (the sessions it keeps standing, and how soon they end).
///
/// In memory and per instance: another instance's re-checks show on its own `/readyz`.
final class ProviderRecheckStatus: Sendable {
    struct Entry: Sendable {
        /// `accepted`, `refused`, `unavailable` or `gave_up`.
        var outcome: String
        var at: Double
        /// While the provider cannot be asked: since when the longest failing session has not been confirmed.
        var failingSince: Double?
    }

    private let entries = Mutex<[String: Entry]>([:])

    func record(provider: String, outcome: String, at: Double, failingSince: Double? = nil) {
        entries.withLock { $0[provider] = Entry(outcome: outcome, at: at, failingSince: failingSince) }
    }

    var byProvider: [String: Entry] { entries.withLock { $0 } }
}
