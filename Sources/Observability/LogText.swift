/// Text from outside (a provider's claim, an operator's name) made safe for one log line.
public enum LogText {
    /// `text` with every control and format character (a newline, an escape sequence, a bidi
    /// override) as `?`: a line-oriented log handler writes values as they are, and such a
    /// character could end the line or make it read as another one.
    public static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isUnprintable) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.map { isUnprintable($0) ? "?" : $0 }))
    }

    static func isUnprintable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }
}
