import Logging
import Synchronization

/// Logs a recurring background check's failures once per outage, not once per attempt.
///
/// The first failure of a check is a warning; while it keeps failing, further
/// failures go to debug; its first success after them is logged as a recovery.
/// A Runtime or a database away for a minute is then two lines at warning and
/// info, not 120 warnings that bury what else happened.
package final class RecurringFailureLog: Sendable {
    /// A background check, named in the log lines.
    package struct Check: Hashable, Sendable {
        let name: String
        /// What goes on while it fails (for instance "will retry").
        let meanwhile: String

        package init(name: String, meanwhile: String) {
            self.name = name
            self.meanwhile = meanwhile
        }
    }

    package let logger: Logger
    private let failing = Mutex<Set<Check>>([])

    package init(logger: Logger) {
        self.logger = logger
    }

    /// Records a failure of `check`: a warning when it starts a streak, debug after that.
    package func failed(_ check: Check, error: any Error) {
        let first = failing.withLock { $0.insert(check).inserted }
        let metadata: Logger.Metadata = ["error_type": "\(type(of: error))"]
        if first {
            logger.warning("\(check.name) failed; \(check.meanwhile)", metadata: metadata)
        } else {
            logger.debug("\(check.name) still failing", metadata: metadata)
        }
    }

    /// Records a success of `check`: the end of a streak of failures is logged once.
    package func succeeded(_ check: Check) {
        guard failing.withLock({ $0.remove(check) != nil }) else { return }
        logger.info("\(check.name) recovered")
    }
}
