/// Reads HTTP/1.1 answers from one connection's bytes the way a strict client must: each answer
/// framed for the request it answers (RFC 9112 §6.3), told that request's method.
///
/// An answer to `HEAD`, a 1xx, 204 or 304 has no body whatever its fields say; otherwise
/// `Transfer-Encoding: chunked` frames it, else `Content-Length`, else it runs to the close.
/// Anything else is an error: a status line that is not `HTTP/1.1 NNN reason`, a field that is
/// not `token: value`, both framings at once, two different lengths, a bad chunk. So a body
/// sent where none belongs, or one missing where the head promised it, shows up as the next
/// answer's status line not being one. Depends on nothing but the standard library (the fuzz
/// target `answer-framing` compiles it alone).
public enum StrictAnswerReader {
    public struct Answer: Sendable, Equatable {
        public var status: Int
        /// The fields as sent, names lower-cased.
        public var fields: [(name: String, value: String)]
        public var body: [UInt8]
        /// 1xx answers (not 101) that came before this one.
        public var interim: [Int]
        /// The body ran to the connection's close (no length, not chunked).
        public var readUntilClose: Bool

        public func field(_ name: String) -> String? { fields.first { $0.name == name }?.value }

        public static func == (lhs: Answer, rhs: Answer) -> Bool {
            lhs.status == rhs.status && lhs.body == rhs.body && lhs.interim == rhs.interim && lhs.readUntilClose == rhs.readUntilClose
                && lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
        }
    }

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let message: String
        /// Where in the bytes it was found.
        public let offset: Int
        public var description: String { "at byte \(offset): \(message)" }

        public init(message: String, offset: Int) {
            self.message = message
            self.offset = offset
        }
    }

    /// The answer starting at `offset`, and where the next one starts; `nil` when the bytes end
    /// before it does and the connection is still open (`closed` false): read more and ask again.
    public static func read(_ bytes: [UInt8], at offset: Int, method: String, closed: Bool) throws(Failure) -> (Answer, next: Int)? {
        var position = offset
        var interim: [Int] = []
        while true {
            guard let (status, fields, bodyStart) = try head(bytes, at: position, closed: closed) else { return nil }
            if (100..<200).contains(status) && status != 101 {
                interim.append(status)
                position = bodyStart
                continue
            }
            var answer = Answer(status: status, fields: fields, body: [], interim: interim, readUntilClose: false)
            let lengths = Set(fields.filter { $0.name == "content-length" }.map(\.value))
            let codings = fields.filter { $0.name == "transfer-encoding" }.map(\.value)
            if !codings.isEmpty && !lengths.isEmpty {
                throw Failure(message: "both Transfer-Encoding and Content-Length", offset: position)
            }
            if lengths.count > 1 { throw Failure(message: "two different Content-Length values", offset: position) }
            if method == "HEAD" || (100..<200).contains(status) || status == 204 || status == 304 {
                return (answer, bodyStart)
            }
            if !codings.isEmpty {
                guard codings.count == 1, codings[0].lowercased() == "chunked" else {
                    throw Failure(message: "Transfer-Encoding \(codings) is not exactly chunked", offset: position)
                }
                guard let (body, next) = try chunks(bytes, at: bodyStart, closed: closed) else { return nil }
                answer.body = body
                return (answer, next)
            }
            if let text = lengths.first {
                guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), text.utf8.count < 10, let length = Int(text) else {
                    throw Failure(message: "Content-Length \(text) is not a length", offset: position)
                }
                guard bodyStart + length <= bytes.count else {
                    if closed { throw Failure(message: "the connection closed \(bodyStart + length - bytes.count) bytes short of the body", offset: bodyStart) }
                    return nil
                }
                answer.body = Array(bytes[bodyStart..<(bodyStart + length)])
                return (answer, bodyStart + length)
            }
            guard closed else { return nil }
            answer.body = Array(bytes[bodyStart...])
            answer.readUntilClose = true
            return (answer, bytes.count)
        }
    }

    /// Every answer in `bytes` (the connection closed after them), for requests of `methods` in
    /// order; fails on bytes left over after the last expected answer.
    public static func readAll(_ bytes: [UInt8], methods: [String]) throws(Failure) -> [Answer] {
        var answers: [Answer] = []
        var position = 0
        for method in methods {
            guard position < bytes.count else { break }
            guard let (answer, next) = try read(bytes, at: position, method: method, closed: true) else { break }
            answers.append(answer)
            position = next
        }
        if position < bytes.count {
            throw Failure(message: "\(bytes.count - position) stray bytes after the last answer: \(printable(bytes[position...].prefix(60)))", offset: position)
        }
        return answers
    }

    /// The status line and fields at `offset`, and where the body starts.
    private static func head(_ bytes: [UInt8], at offset: Int, closed: Bool) throws(Failure) -> (Int, [(name: String, value: String)], Int)? {
        var lines: [ArraySlice<UInt8>] = []
        var position = offset
        while true {
            guard let end = try lineEnd(bytes, from: position) else {
                if closed { throw Failure(message: "the connection closed inside a head: \(printable(bytes[offset...].prefix(60)))", offset: offset) }
                return nil
            }
            let line = bytes[position..<end]
            position = end + 2
            if line.isEmpty { break }
            lines.append(line)
            if lines.count > 200 { throw Failure(message: "more than 200 lines in a head", offset: offset) }
        }
        guard let statusLine = lines.first else { throw Failure(message: "an empty line where a status line belongs", offset: offset) }
        let text = String(decoding: statusLine, as: UTF8.self)
        let digits = Array(text.utf8.dropFirst(9).prefix(3))
        guard text.hasPrefix("HTTP/1.1 "), digits.count == 3, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            text.utf8.count == 12 || Array(text.utf8)[12] == 0x20, let status = Int(String(decoding: digits, as: UTF8.self))
        else { throw Failure(message: "not a status line: \(printable(statusLine.prefix(60)))", offset: offset) }
        var fields: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                line[line.startIndex..<colon].allSatisfy(isTokenByte)
            else { throw Failure(message: "not a field: \(printable(line.prefix(60)))", offset: offset) }
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self).lowercased()
            var value = line[(colon + 1)...]
            while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
            while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
            guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
                throw Failure(message: "a control byte in the value of \(name)", offset: offset)
            }
            fields.append((name, String(decoding: value, as: UTF8.self)))
        }
        return (status, fields, position)
    }

    /// A chunked body at `offset` (RFC 9112 §7.1), and where the answer ends.
    private static func chunks(_ bytes: [UInt8], at offset: Int, closed: Bool) throws(Failure) -> ([UInt8], Int)? {
        var body: [UInt8] = []
        var position = offset
        while true {
            guard let end = try lineEnd(bytes, from: position) else {
                if closed { throw Failure(message: "the connection closed inside a chunked body (no last chunk)", offset: position) }
                return nil
            }
            let sizeText = bytes[position..<end].prefix { $0 != UInt8(ascii: ";") }
            guard !sizeText.isEmpty, sizeText.count <= 8, let size = Int(String(decoding: sizeText, as: UTF8.self), radix: 16) else {
                throw Failure(message: "not a chunk size: \(printable(bytes[position..<end].prefix(40)))", offset: position)
            }
            position = end + 2
            if size == 0 {
                // Trailer fields, then the empty line.
                while true {
                    guard let trailerEnd = try lineEnd(bytes, from: position) else {
                        if closed { throw Failure(message: "the connection closed inside the trailer section", offset: position) }
                        return nil
                    }
                    let empty = trailerEnd == position
                    position = trailerEnd + 2
                    if empty { return (body, position) }
                }
            }
            guard position + size + 2 <= bytes.count else {
                if closed { throw Failure(message: "the connection closed inside a chunk", offset: position) }
                return nil
            }
            body += bytes[position..<(position + size)]
            guard bytes[position + size] == 0x0D, bytes[position + size + 1] == 0x0A else {
                throw Failure(message: "a chunk not followed by CRLF", offset: position + size)
            }
            position += size + 2
        }
    }

    /// Where the CRLF ending the line at `from` starts; `nil` when the bytes end first.
    private static func lineEnd(_ bytes: [UInt8], from: Int) throws(Failure) -> Int? {
        var index = from
        while index < bytes.count {
            if bytes[index] == 0x0A { throw Failure(message: "a bare LF (lines end with CRLF)", offset: index) }
            if bytes[index] == 0x0D {
                guard index + 1 < bytes.count else { return nil }
                guard bytes[index + 1] == 0x0A else { throw Failure(message: "a bare CR (lines end with CRLF)", offset: index) }
                return index
            }
            index += 1
        }
        return nil
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// Bytes as text with CR and LF visible, for a failure's message.
    public static func printable<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        var text = ""
        for byte in bytes {
            switch byte {
            case 0x0D: text += "\\r"
            case 0x0A: text += "\\n"
            case 0x20..<0x7F: text.unicodeScalars.append(Unicode.Scalar(byte))
            default: text += "\\x" + String(byte, radix: 16)
            }
        }
        return text
    }
}
