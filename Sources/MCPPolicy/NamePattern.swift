/// A tool, prompt, resource or method name as a rule names it: exactly, or as a glob whose `*`
/// stands for any run of characters (none included). No other character is special.
///
/// Matched byte for byte over UTF-8, as the MCP server compares names: no case folding and no
/// Unicode equivalence, so a name spelled another way is another name (and no rule's).
public struct NamePattern: Sendable, Equatable, CustomStringConvertible {
    /// The pattern as written.
    public let text: String
    /// The literal runs between the stars.
    private let parts: [[UInt8]]

    /// - Returns: `nil` for an empty pattern.
    public init?(_ text: String) {
        guard !text.isEmpty else { return nil }
        self.text = text
        let bytes = Array(text.utf8)
        parts = bytes.split(separator: UInt8(ascii: "*"), omittingEmptySubsequences: false).map(Array.init)
    }

    public var description: String { text }

    /// Whether the pattern has no star: it names one thing.
    public var isExact: Bool { parts.count == 1 }

    /// Whether `name` is one the pattern names (over its bytes in place: no copy per call decided).
    public func matches(_ name: String) -> Bool {
        let bytes = name.utf8
        if isExact { return bytes.elementsEqual(parts[0]) }
        let first = parts[0]
        let last = parts[parts.count - 1]
        guard bytes.count >= first.count + last.count, bytes.starts(with: first), bytes.reversed().starts(with: last.reversed()) else { return false }
        // The middle runs, each found leftmost after the one before, between the fixed ends.
        var rest = bytes.dropFirst(first.count).dropLast(last.count)
        for part in parts.dropFirst().dropLast() where !part.isEmpty {
            guard let found = rest.firstRange(of: part) else { return false }
            rest = rest[found.upperBound...]
        }
        return true
    }

    /// Whether every name `later` matches is matched by this pattern too (so a rule for `later`
    /// after one for this pattern can never decide anything): the same text, or `*` alone.
    public func covers(_ later: NamePattern) -> Bool {
        text == "*" || text == later.text || (isExact == false && later.isExact && matches(later.text))
    }
}
