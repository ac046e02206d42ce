import Foundation

/// The bounds on timings the tests check, as the contract states them, stretched only for a
/// sanitized run.
///
/// A contract bound ("a logout closes the socket within a second") is checked at its value in
/// the plain suite. Under AddressSanitizer every instruction costs several times more and the
/// whole suite runs at once on two cores, so `.ci/run` sets `PORTCULLIS_TIME_SCALE` (3) for that
/// phase: it looks for memory errors, and its timings only have to show that the thing happened
/// in bounded time, not that the bound holds.
public enum TimeBounds {
    /// How much a sanitized run stretches each bound (1 in the plain suite).
    public static let scale: Double = {
        guard let text = ProcessInfo.processInfo.environment["PORTCULLIS_TIME_SCALE"], let value = Double(text), value >= 1 else { return 1 }
        return value
    }()

    /// `seconds`, as this run checks it.
    public static func seconds(_ seconds: Double) -> Double {
        seconds * scale
    }
}
