import PortcullisTestSupport
import Testing

@testable import JOSE

@Suite("Strict base64url")
struct Base64URLTests {
    @Test("round-trips every length from 0 to 64 bytes")
    func roundTrip() throws {
        for length in 0...64 {
            let bytes = try SecureRandom.bytes(length)
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == bytes)
        }
    }

    @Test("refuses padding, the standard alphabet, whitespace and impossible lengths",
          arguments: ["QQ==", "QQ=", "a+b/", "QU JD", "Q", "QUJDR", "QUJD\n", "=", "QUJD=", "\u{00C4}QUJ"])
    func refusesNonCanonical(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test("refuses non-zero trailing bits: one string per byte sequence")
    func trailingBits() {
        #expect(Base64URL.decode("QQ") == [0x41])
        #expect(Base64URL.decode("QR") == nil)
        #expect(Base64URL.decode("QUI") == [0x41, 0x42])
        #expect(Base64URL.decode("QUJ") == nil)
    }
}

extension Base64URLTests {
    @Test("isCanonical accepts exactly what decode accepts: every length to 12 over the alphabet's edges, padding, the standard alphabet and other bytes, and trailing-bit variants")
    func isCanonicalMatchesDecode() {
        let characters = Array("AQRZaz09-_+/= .\u{0}\u{FF}".utf8) + [0xC3, 0x80]
        var generator = SystemRandomNumberGenerator()
        var checked = 0
        for length in 0...12 {
            for _ in 0..<400 {
                let text = (0..<length).map { _ in characters.randomElement(using: &generator)! }
                let decoded = text.withUnsafeBytes { Base64URL.decode($0) }
                #expect(Base64URL.isCanonical(text) == (decoded != nil), "\(text)")
                checked += decoded == nil ? 0 : 1
            }
        }
        #expect(checked > 100, "some canonical strings were among those checked")
        for text in ["QQ", "QR", "QUI", "QUJ", "QUJD", "QUJD="] {
            #expect(Base64URL.isCanonical(Array(text.utf8)) == (Base64URL.decode(text) != nil), "\(text)")
        }
    }
}

extension Base64URLTests {
    /// RFC 4648 read one character at a time, six bits each (the specification, not the fast path).
    static func reference(_ text: [UInt8]) -> [UInt8]? {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        guard text.count % 4 != 1 else { return nil }
        var bits: UInt32 = 0, held = 0
        var out: [UInt8] = []
        for character in text {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            bits = bits << 6 | UInt32(value)
            held += 6
            if held >= 8 {
                held -= 8
                out.append(UInt8(truncatingIfNeeded: bits >> UInt32(held)))
                bits &= (1 << UInt32(held)) - 1
            }
        }
        return bits == 0 ? out : nil  // the unused trailing bits must be zero
    }

    @Test("decode agrees with a six-bits-at-a-time reading of RFC 4648: every byte value at every place in a group, and random text of every length to 40")
    func decodeMatchesTheSpecification() {
        for place in 0..<8 {
            for byte in 0...255 {
                var text = Array("QUJDREVG".utf8)
                text[place] = UInt8(byte)
                let decoded = text.withUnsafeBytes { Base64URL.decode($0) }
                #expect(decoded == Self.reference(text), "byte \(byte) at \(place)")
            }
        }
        let characters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8) + Array("+/= ".utf8)
        var generator = SeededGenerator(seed: 68)
        for length in 0...40 {
            for _ in 0..<50 {
                let text = (0..<length).map { _ in characters.randomElement(using: &generator)! }
                #expect(text.withUnsafeBytes { Base64URL.decode($0) } == Self.reference(text), "\(text)")
            }
        }
    }
}

@Suite("Strict JSON reader")
struct StrictJSONReaderTests {
    func read(_ text: String) throws(JSONReadError) -> JSONValue {
        try StrictJSONReader().parse(Array(text.utf8))
    }

    func code(_ text: String) -> String? {
        do {
            _ = try read(text)
            return nil
        } catch {
            return error.code
        }
    }

    @Test("reads objects, arrays, strings with escapes, numbers and literals")
    func readsJSON() throws {
        let value = try read(#"{"a":[1,-2.5,3e2,true,false,null],"b":"x\"\\\/\n\u00e9\ud83d\ude00","c":{}}"#)
        guard case .object(let object) = value else { Issue.record("not an object"); return }
        #expect(object["a"] == [1, -2.5, 300, true, false, nil])
        #expect(object["b"] == .string("x\"\\/\né😀"))
        #expect(object["c"] == .object(JSONObject()))
        #expect(object.names == ["a", "b", "c"])
    }

    @Test("refuses duplicate member names, also in large objects and through escapes")
    func duplicates() {
        #expect(code(#"{"a":1,"a":2}"#) == "duplicate_member")
        #expect(code(#"{"a":1,"\u0061":2}"#) == "duplicate_member")
        let many = (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(code("{" + many + ",\"k7\":0}") == "duplicate_member")
        #expect(code("{" + many + "}") == nil)
    }

    @Test("refuses a byte-order mark, invalid UTF-8 and lone surrogates")
    func encoding() throws {
        #expect(code("\u{FEFF}{}") == "byte_order_mark")
        #expect(throws: JSONReadError.self) { try StrictJSONReader().parse([0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JSONReadError.self) { try StrictJSONReader().parse([0x22, 0xED, 0xA0, 0x80, 0x22]) }
        #expect(code(#""\ud800""#) == "invalid_utf8")
        #expect(code(#""\udc00x""#) == "invalid_utf8")
    }

    @Test("refuses nesting deeper than the limit")
    func depth() {
        #expect(code(String(repeating: "[", count: 32) + String(repeating: "]", count: 32)) == nil)
        #expect(code(String(repeating: "[", count: 33) + String(repeating: "]", count: 33)) == "too_deep")
        #expect(code(String(repeating: "{\"a\":", count: 33) + "1" + String(repeating: "}", count: 33)) == "too_deep")
    }

    @Test("refuses numbers outside the grammar or a double's range", arguments: ["01", "1.", ".5", "+1", "1e", "-", "NaN", "Infinity", "1e400", "-1e400", "0x10"])
    func numbers(text: String) {
        #expect(code(text) != nil)
    }

    @Test("refuses trailing data, trailing commas, control characters and single quotes",
          arguments: ["{} {}", "[1,]", "{\"a\":1,}", "\"a\tb\"", "'a'", "{a:1}", "", "tru", "[1 2]"])
    func syntax(text: String) {
        #expect(code(text) != nil)
    }

    @Test("the writer's output reads back to the same value")
    func writerRoundTrip() throws {
        let value: JSONValue = ["s": "quote \" backslash \\ newline \n tab \t bell \u{07}", "n": [0, -1, 1.5, 1_800_000_000], "o": ["x": nil, "y": true]]
        #expect(try read(JSONWriter.string(value)) == value)
        #expect(try read(JSONWriter.pretty(value)) == value)
    }
}

@Suite("Registered names: each header and claim name the verifier acts on is recognised in one step")
struct RegisteredNameTests {
    @Test("every registered name classifies as itself, from a member the reader made and from its text; a name of another spelling or length, or one the list lacks, is none")
    func everyNameClassifiesAsItself() throws {
        for name in RegisteredName.allCases {
            #expect(RegisteredName.classify(name.text) == name, "\(name.text)")
            let object = try StrictJSONReader().parseObject(Array("{\"\(name.text)\":1}".utf8))
            let member = try #require(object.members.first)
            #expect(RegisteredName.classify(member) == name, "\(name.text) as the reader hands it out")
            #expect(RegisteredName.classify(name.text.uppercased()) == nil && RegisteredName.classify(name.text + "x") == nil, "\(name.text)")
        }
        for other in ["email", "groups", "Kid", "ki", "kidd", "", "éxp"] {
            #expect(RegisteredName.classify(other) == nil, "\(other)")
        }
    }

    @Test("a member knows its registered name however it was made: read plainly, read through escapes, built, or assigned; another name is none")
    func membersKnowTheirNames() throws {
        let read = try StrictJSONReader().parseObject(Array(#"{"sub":1,"\u0065xp":2,"t\u0065nant_id":3,"email":4,"\u00e9xp":5,"su":6}"#.utf8))
        #expect(read.members.map { RegisteredName.classify($0) } == [.sub, .exp, .tenantID, nil, nil, nil])
        #expect(RegisteredName.classify(JSONMember("kid", "k1")) == .kid && RegisteredName.classify(JSONMember("kidx", "k1")) == nil)
        var built = JSONObject()
        built["client_id"] = "web"
        built["scope"] = "a"
        built["client_id"] = "cli"
        #expect(built.members.map { RegisteredName.classify($0) } == [.clientID, .scope])
        #expect(built.value(of: .clientID) == "cli" && built.value(of: .sub) == nil && read.value(of: .exp) == 2)
        // "mzeigca" hashes (FNV-1a) to x5u's hash: a candidate by hash, refused by its text, on every path.
        #expect(JSONMember.hash("mzeigca") == JSONMember.hash("x5u"))
        let collision = try StrictJSONReader().parseObject(Array(#"{"mzeigca":1,"mzeig\u0063a2":2,"x5u":3}"#.utf8))
        #expect(collision.members.map { RegisteredName.classify($0) } == [nil, nil, .x5u])
        var assigned = JSONObject()
        assigned["mzeigca"] = 1
        #expect(RegisteredName.classify(JSONMember("mzeigca", 1)) == nil && assigned.members.map { RegisteredName.classify($0) } == [nil])
    }
}
