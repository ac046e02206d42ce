@testable import DataPlane
@testable import EdgeHTTP
import Testing

@Suite("HeaderScreen: the byte-level verdict on a header name is the one the name sets give its folded form")
struct HeaderScreenTests {
    /// The rule as the sets state it, over the folded name (lower-case, `_` and `.` as `-`).
    private func expected(_ name: String) -> HeaderScreen.Verdict {
        let folded = HeaderScreen.folded(name)
        if HeaderScreen.neverForwarded.contains(folded) { return .neverForwarded }
        if HeaderScreen.identityHeaders.contains(folded) || HeaderScreen.identityPrefixes.contains(where: folded.hasPrefix) { return .identity }
        return .ordinary
    }

    /// `name` with each letter in a random case and each `-` randomly kept or spelled `_` or `.`.
    private func respelled(_ name: String, using generator: inout some RandomNumberGenerator) -> String {
        String(
            name.map { character -> Character in
                if character == "-" { return ["-", "_", "."].randomElement(using: &generator)! }
                return Bool.random(using: &generator) ? Character(character.uppercased()) : character
            })
    }

    @Test("every listed name, in any case and with _ or . for -, gets its set's verdict")
    func listedNamesInEverySpelling() {
        var generator = SystemRandomNumberGenerator()
        for name in HeaderScreen.neverForwarded.union(HeaderScreen.identityHeaders) {
            let verdict: HeaderScreen.Verdict = HeaderScreen.neverForwarded.contains(name) ? .neverForwarded : .identity
            #expect(HeaderScreen.verdict(name) == verdict, "\(name)")
            for _ in 0..<20 {
                let spelling = respelled(name, using: &generator)
                #expect(HeaderScreen.verdict(spelling) == verdict, "\(spelling)")
            }
        }
        #expect(HeaderScreen.verdict("X_Portcullis_Anything") == .identity)
        #expect(HeaderScreen.verdict("X-PORTCULLIS-") == .identity)
        // Every field forward-auth answers, and any it may add, in the spellings frameworks fold together.
        for name in ["X-Auth-Request-User", "X-Auth-Request-Tenant", "X-Auth-Request-Email", "X-Auth-Request-Groups", "X_Auth_Request_User", "x.auth.request.preferred-username"] {
            #expect(HeaderScreen.verdict(name) == .identity, "\(name)")
        }
        #expect(HeaderScreen.verdict("X-Auth-Requests") == .ordinary)
    }

    @Test("a listed name with one byte changed, added or dropped, and random names, get the sets' verdict")
    func nearMissesAndRandomNames() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("abcxyzABCXYZ019-_.!~".utf8)
        var ordinary = 0
        for name in HeaderScreen.neverForwarded.union(HeaderScreen.identityHeaders) {
            var bytes = Array(name.utf8)
            for index in bytes.indices {
                var changed = bytes
                changed[index] = alphabet.randomElement(using: &generator)!
                let text = String(decoding: changed, as: UTF8.self)
                #expect(HeaderScreen.verdict(text) == expected(text), "\(text)")
            }
            let longer = String(decoding: bytes + [UInt8(ascii: "s")], as: UTF8.self)
            #expect(HeaderScreen.verdict(longer) == expected(longer), "\(longer)")
            bytes.removeLast()
            let shorter = String(decoding: bytes, as: UTF8.self)
            #expect(HeaderScreen.verdict(shorter) == expected(shorter), "\(shorter)")
        }
        for length in 0...32 {
            for _ in 0..<50 {
                let text = String(decoding: (0..<length).map { _ in alphabet.randomElement(using: &generator)! }, as: UTF8.self)
                #expect(HeaderScreen.verdict(text) == expected(text), "\(text)")
                ordinary += HeaderScreen.verdict(text) == .ordinary ? 1 : 0
            }
        }
        #expect(ordinary > 1000, "most random names are ordinary")
    }

    @Test("neither an identity header (in any spelling), a hop-by-hop one nor one the answer's Connection lists comes back from an upstream")
    func returnableFieldsOfAnAnswer() throws {
        let bytes = Array("HTTP/1.1 200 OK\r\nX_Request_Id: up\r\nKeep-Alive: timeout=5\r\nConnection: keep-alive, X-Trace\r\nx-trace: 1\r\nServer: s\r\nContent-Length: 0\r\n\r\n".utf8)
        var parser = UpstreamResponseParser()
        parser.expectResponse(toHEAD: false)
        var head: UpstreamResponseHead?
        try bytes.withUnsafeBytes { raw in
            try parser.parse(raw) { event in
                if case .head(let parsed) = event { head = parsed }
            }
        }
        let response = try #require(head)
        let listed = HeaderScreen.connectionListed(response)
        #expect(listed == ["x-trace"])
        let returned = response.fields.filter { HeaderScreen.isReturnable(response, $0, connectionListed: listed) }.map { response.nameString(of: $0) }
        #expect(returned == ["Server"], "Content-Length is the gateway's own to write, X-Request-Id an identity field")
    }
}
