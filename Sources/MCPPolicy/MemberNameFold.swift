import JOSE

/// Member names as JSON decoders that match them loosely read them: Go's `encoding/json` (any
/// case, with Unicode's simple folding: `ſ` is `s`, the Kelvin sign `K` is `k`), .NET with
/// `PropertyNameCaseInsensitive`, mark3labs/mcp-go.
///
/// The gateway decides on members spelled exactly (`method`, `params.name`); a server with such a
/// decoder would also take `Method`, `mEthod` or `paramſ`, and the last of them wins. So, in every
/// object the gateway reads, a member that folds to a name it reads must be spelled exactly as
/// that name, and no two members may fold alike: then every decoder, strict or loose, first- or
/// last-duplicate-wins, reads the same members the gateway decided on.
public enum MemberNameFold {
    /// The name as a loose decoder compares it: ASCII letters in lower case; the four non-ASCII
    /// letters whose simple case mapping is ASCII (`ſ`, `K`, `İ`, `ı`) as that letter; any
    /// other scalar by its lower-case mapping.
    public static func key(_ name: String) -> String {
        var folded = String.UnicodeScalarView()
        for scalar in name.unicodeScalars {
            switch scalar.value {
            case 0x41...0x5A: folded.append(Unicode.Scalar(UInt8(truncatingIfNeeded: scalar.value) | 0x20))
            case 0..<0x80: folded.append(scalar)
            case 0x017F: folded.append("s")  // LATIN SMALL LETTER LONG S: upper case S
            case 0x212A: folded.append("k")  // KELVIN SIGN: lower case k
            case 0x0130, 0x0131: folded.append("i")  // dotted capital I (lower case i), dotless small i (upper case I)
            default: folded.append(contentsOf: scalar.properties.lowercaseMapping.unicodeScalars)
            }
        }
        return String(folded)
    }

    /// The problem with `object`'s member names, when the object is one the gateway reads `reads`
    /// of: a member spelled otherwise than the name it folds to (`Method` beside or instead of
    /// `method`), or two members that fold alike. `nil` when every decoder reads it alike.
    public static func ambiguity(in object: JSONObject, reads: [String]) -> String? {
        ambiguity(in: object, reads: Reads(reads))
    }

    /// The names an object is read for, with their keys, made once (every MCP POST asks).
    public struct Reads: Sendable {
        let names: [String]
        let keys: [String]

        public init(_ names: [String]) {
            self.names = names
            keys = names.map { MemberNameFold.isFolded($0) ? $0 : MemberNameFold.key($0) }
        }
    }

    /// `ambiguity(in:reads:)` with the names' keys made beforehand.
    public static func ambiguity(in object: JSONObject, reads: Reads) -> String? {
        // A lower-case ASCII name is its own key, and exact duplicates never reach here (the
        // strict reader refuses them): only the other names need folding and comparing.
        let (readNames, readKeys) = (reads.names, reads.keys)
        var folded: [String] = []
        for member in object.members {
            // A control character (NUL above all: a decoder keeping names as C strings ends the name there).
            if member.name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { return "a member name holding a control character" }
            let plain = isFolded(member.name)
            let memberKey = plain ? member.name : key(member.name)
            if let index = readKeys.firstIndex(of: memberKey), readNames[index] != member.name {
                return "a member spelled like \(readNames[index]) but not as it"
            }
            if !plain { folded.append(memberKey) }
        }
        guard !folded.isEmpty else { return nil }
        if object.count <= 16 {
            for (index, key) in folded.enumerated() where object[key] != nil || folded[..<index].contains(key) {
                return "two members whose names differ only in case"
            }
            return nil
        }
        // A large object is hashed, so that many members cost linear time.
        var seen = Set(object.members.lazy.map(\.name).filter(isFolded))
        for key in folded where !seen.insert(key).inserted { return "two members whose names differ only in case" }
        return nil
    }

    /// Whether `name` is its own key: lower-case ASCII (every member of a well-formed message).
    private static func isFolded(_ name: String) -> Bool {
        name.utf8.allSatisfy { $0 < 0x80 && !(0x41...0x5A).contains($0) }
    }
}
