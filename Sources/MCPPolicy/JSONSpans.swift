import JOSE

/// Byte ranges inside a JSON document already read by `StrictJSONReader` (so well formed): the
/// value of a member, the elements of an array. A list answer is filtered by cutting elements out
/// of the server's own bytes, so nothing else in it is rewritten (no number or string re-spelled).
struct JSONSpans {
    let bytes: [UInt8]

    /// The range of the value of member `name` of the object spanning `object` (`nil`: not an object, or no such member).
    /// Member names are compared decoded, so `"\u0072esult"` is `result`, as any client reads it.
    func member(_ name: String, in object: Range<Int>) -> Range<Int>? {
        var index = skipWhitespace(object.lowerBound)
        guard index < object.upperBound, bytes[index] == UInt8(ascii: "{") else { return nil }
        index = skipWhitespace(index + 1)
        while index < object.upperBound, bytes[index] == UInt8(ascii: "\"") {
            let keyEnd = skipString(index)
            let key = try? StrictJSONReader().parse(Array(bytes[index..<keyEnd])).stringValue
            index = skipWhitespace(keyEnd)
            index = skipWhitespace(index + 1)  // the colon
            let valueEnd = skipValue(index)
            if key == name { return index..<valueEnd }
            index = skipWhitespace(valueEnd)
            if index < object.upperBound, bytes[index] == UInt8(ascii: ",") { index = skipWhitespace(index + 1) }
        }
        return nil
    }

    /// The ranges of the elements of the array spanning `array` (`nil`: not an array).
    func elements(of array: Range<Int>) -> [Range<Int>]? {
        var index = skipWhitespace(array.lowerBound)
        guard index < array.upperBound, bytes[index] == UInt8(ascii: "[") else { return nil }
        index = skipWhitespace(index + 1)
        var ranges: [Range<Int>] = []
        while index < array.upperBound, bytes[index] != UInt8(ascii: "]") {
            let end = skipValue(index)
            ranges.append(index..<end)
            index = skipWhitespace(end)
            if index < array.upperBound, bytes[index] == UInt8(ascii: ",") { index = skipWhitespace(index + 1) }
        }
        return ranges
    }

    func skipWhitespace(_ start: Int) -> Int {
        var index = start
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        return index
    }

    /// The index after the string starting at `start` (its opening quote).
    func skipString(_ start: Int) -> Int {
        var index = start + 1
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\\"): index += 2
            case UInt8(ascii: "\""): return index + 1
            default: index += 1
            }
        }
        return index
    }

    /// The index after the value starting at `start`.
    func skipValue(_ start: Int) -> Int {
        guard start < bytes.count else { return start }
        switch bytes[start] {
        case UInt8(ascii: "\""):
            return skipString(start)
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            var index = start
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    index = skipString(index)
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 { return index + 1 }
                default: break
                }
                index += 1
            }
            return index
        default:
            var index = start
            while index < bytes.count, ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
            return index
        }
    }
}
