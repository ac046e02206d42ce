import EdgeHTTP
import Testing

@Suite("The gateway's pages escape by scalar: what a name holds never leaves its attribute or text")
struct PageEscapingTests {
    @Test("a quote, an angle bracket or an ampersand followed by a combining mark (one grapheme cluster, equal to none of them) is escaped all the same, the mark kept")
    func combiningMarksDoNotHideSpecials() {
        for special in ["\"", "'", "<", ">", "&"] {
            for mark in ["\u{301}", "\u{338}", "\u{20D2}", "\u{FE0F}"] {
                let escaped = RefusalPage.escaped("a" + special + mark + " onmouseover=alert(1)")
                #expect(!escaped.unicodeScalars.contains { "\"'<>".unicodeScalars.contains($0) }, "\(special)+\(mark): \(escaped)")
                #expect(escaped.unicodeScalars.contains(mark.unicodeScalars.first!), "\(special)+\(mark): the mark is kept")
            }
        }
        #expect(RefusalPage.escaped("Tom & \"Jerry\" <x>'") == "Tom &amp; &quot;Jerry&quot; &lt;x&gt;&#39;")
    }
}
