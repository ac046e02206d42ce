#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// UTC timestamps as RFC 3339 text, to whole seconds: `2026-11-22T02:44:25Z`.
public enum RFC3339 {
    public static func format(_ seconds: Double) -> String {
        var time = time_t(seconds.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}

extension RFC3339 {
    /// Reads exactly the form `format` writes (`YYYY-MM-DDTHH:MM:SSZ`); `nil` otherwise.
    public static func parse(_ text: String) -> Double? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20, bytes[4] == 0x2D, bytes[7] == 0x2D, bytes[10] == 0x54, bytes[13] == 0x3A, bytes[16] == 0x3A, bytes[19] == 0x5A
        else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var value: Int32 = 0
            for byte in bytes[range] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int32(byte - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
            let minute = number(14..<16), let second = number(17..<19), (1...12).contains(month), (1...31).contains(day), hour < 24,
            minute < 60, second < 61
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Double(timegm(&parts))
    }
}
