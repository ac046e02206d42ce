/// Frames an upstream's HTTP/1.1 responses in its bytes as they arrive, for a proxy that
/// relays bodies without re-parsing them.
///
/// Fed each read as it comes (`parse`), it reports a response's head (copied once, as
/// `UpstreamResponseHead`), its body as ranges of the bytes it was given (so the caller
/// forwards slices of its own buffer, never a copy), and its end. Informational answers
/// (1xx other than 101) are skipped, as nginx does; a 101 is the final answer to a request that
/// asked for an upgrade (what follows it is the upgraded protocol's, reported as body until the
/// connection closes), and an error to any other. Strict where relaying could be
/// ambiguous: a folded field, a control character in a value, a `Content-Length` that is
/// not one number, a bad chunk line, or a head past its bound is an error, and the
/// connection is not used again. Depends on nothing but the standard library, so the
/// fuzz target compiles it alone (`scripts/fuzz.sh upstream-response`).
struct UpstreamResponseParser {
    enum Event {
        case head(UpstreamResponseHead)
        /// Body bytes: this range of the bytes given to `parse`.
        case body(Range<Int>)
        /// The response ended; the connection may be reused if its head said so.
        case end
    }

    private enum State {
        /// No request is waiting: any byte is an error.
        case idle
        case head
        case body(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        /// The CRLF after a chunk's data.
        case chunkDataEnd
        /// Trailer fields after the last chunk: read, bounded, dropped.
        case trailers(bytes: Int)
        case untilClose
        case failed(UpstreamResponseError)
    }

    /// The most bytes of a head (or of all trailers) before the response is refused.
    let maximumHeadBytes: Int
    /// The most fields in a head.
    let maximumFieldCount: Int
    /// The most bytes of a chunk's size line (with its extensions).
    static let maximumChunkLineBytes = 4_096

    private var state = State.idle
    private var answersHEAD = false
    /// The request asked for an upgrade (a WebSocket's opening handshake): a 101 may answer it.
    private var asksUpgrade = false
    /// A head, a chunk line or a trailer line still incomplete at the end of the last read.
    private var pending: [UInt8] = []
    /// The bytes of the line being read, counting a CR; whether its last byte was a CR.
    private var lineLength = 0
    private var lastWasCR = false
    /// The last head's bytes and fields, kept so the next head on the connection is read into
    /// the same storage once the exchange has let go of the last one (no allocation per answer;
    /// while it still holds them, new storage is made).
    private var spareBytes: [UInt8] = []
    private var spareFields: [UpstreamResponseHead.Field] = []

    init(maximumHeadBytes: Int = 64 * 1_024, maximumFieldCount: Int = 256) {
        self.maximumHeadBytes = maximumHeadBytes
        self.maximumFieldCount = maximumFieldCount
    }

    /// A request was sent: the bytes that come next are its response. `toHEAD`: it was a `HEAD`
    /// request, whose response has no body whatever its `Content-Length` says.
    mutating func expectResponse(toHEAD: Bool, upgrade: Bool = false) {
        state = .head
        answersHEAD = toHEAD
        asksUpgrade = upgrade
        pending.removeAll(keepingCapacity: true)
        lineLength = 0
        lastWasCR = false
    }

    /// Whether no response is in progress (the last one ended, or none was asked for).
    var isIdle: Bool {
        if case .idle = state { return true }
        return false
    }

    /// Parses one read's bytes, reporting what they complete through `emit` in order.
    /// After an error every later call throws it again.
    mutating func parse(_ bytes: UnsafeRawBufferPointer, _ emit: (Event) -> Void) throws(UpstreamResponseError) {
        var index = 0
        do throws(UpstreamResponseError) {
            while index < bytes.count {
                switch state {
                case .failed(let error):
                    throw error
                case .idle:
                    throw UpstreamResponseError.unsolicited
                case .head:
                    guard let head = try readHead(bytes, from: &index) else { return }
                    try begin(head, emit)
                case .body(let remaining):
                    let take = min(remaining, bytes.count - index)
                    emit(.body(index..<(index + take)))
                    index += take
                    if take == remaining {
                        state = .idle
                        emit(.end)
                    } else {
                        state = .body(remaining: remaining - take)
                    }
                case .untilClose:
                    emit(.body(index..<bytes.count))
                    index = bytes.count
                case .chunkSize:
                    guard let line = try readLine(bytes, from: &index, limit: Self.maximumChunkLineBytes) else { return }
                    let size = try Self.chunkSize(line)
                    state = size == 0 ? .trailers(bytes: 0) : .chunkData(remaining: size)
                case .chunkData(let remaining):
                    let take = min(remaining, bytes.count - index)
                    emit(.body(index..<(index + take)))
                    index += take
                    state = take == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - take)
                case .chunkDataEnd:
                    guard let line = try readLine(bytes, from: &index, limit: 2) else { return }
                    guard line.isEmpty else { throw UpstreamResponseError.invalidChunk }
                    state = .chunkSize
                case .trailers(let total):
                    guard let line = try readLine(bytes, from: &index, limit: maximumHeadBytes - total) else { return }
                    if line.isEmpty {
                        state = .idle
                        emit(.end)
                    } else {
                        state = .trailers(bytes: total + line.count + 2)
                    }
                }
            }
        } catch {
            state = .failed(error)
            throw error
        }
    }

    /// The connection closed: `true` when that ends the response in progress (a body read until
    /// the close), `false` when no response was in progress or it is cut short.
    mutating func connectionClosed() -> Bool {
        guard case .untilClose = state else { return false }
        state = .idle
        return true
    }

    // MARK: Heads

    /// The head once its blank line has arrived (with what came before in `pending`); `nil` until then.
    private mutating func readHead(_ bytes: UnsafeRawBufferPointer, from index: inout Int) throws(UpstreamResponseError) -> UpstreamResponseHead? {
        let start = index
        var position = index
        while position < bytes.count {
            let byte = bytes[position]
            position += 1
            if byte == 0x0A {
                let content = lineLength - (lastWasCR ? 1 : 0)
                lineLength = 0
                lastWasCR = false
                if content == 0 {
                    guard pending.count + (position - start) <= maximumHeadBytes else { throw UpstreamResponseError.headTooLarge }
                    var head = Self.take(&spareBytes)
                    head.append(contentsOf: pending)
                    pending.removeAll(keepingCapacity: true)
                    head.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<position]))
                    index = position
                    spareBytes = head
                    return try parseHead(head)
                }
            } else {
                lineLength += 1
                lastWasCR = byte == 0x0D
            }
        }
        guard pending.count + (position - start) <= maximumHeadBytes else { throw UpstreamResponseError.headTooLarge }
        pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<position]))
        index = position
        return nil
    }

    /// Reports a complete head, or skips it when informational, and sets the state for its body.
    private mutating func begin(_ head: UpstreamResponseHead, _ emit: (Event) -> Void) throws(UpstreamResponseError) {
        if head.status == 101, asksUpgrade {
            // Switched: every later byte is the upgraded protocol's, until the connection closes.
            emit(.head(head))
            state = .untilClose
            return
        }
        if head.status < 200 {
            guard head.status != 101 else { throw UpstreamResponseError.unexpectedUpgrade }
            state = .head  // 100, 103 Early Hints, ...: the final response follows
            return
        }
        emit(.head(head))
        switch head.framing {
        case .none:
            state = .idle
            emit(.end)
        case .length(let length):
            state = .body(remaining: length)
        case .chunked:
            state = .chunkSize
        case .untilClose:
            state = .untilClose
        }
    }

    /// The status line and fields of `bytes` (a whole head through its blank line), checked in one pass.
    private mutating func parseHead(_ bytes: [UInt8]) throws(UpstreamResponseError) -> UpstreamResponseHead {
        var status = 0
        var minorVersion = 0
        var reason = 0..<0
        var fields = Self.take(&spareFields)
        fields.reserveCapacity(16)
        var contentLength: Int?
        var lengthSent = false
        var transferCodings = false
        var lastCodingIsChunked = false
        var closes = false
        var keepAliveToken = false
        var lineStart = 0
        var sawStatusLine = false
        for position in bytes.indices where bytes[position] == 0x0A {
            var end = position
            if end > lineStart && bytes[end - 1] == 0x0D { end -= 1 }
            let line = lineStart..<end
            lineStart = position + 1
            guard sawStatusLine else {
                (minorVersion, status, reason) = try Self.statusLine(bytes, line)
                sawStatusLine = true
                continue
            }
            if line.isEmpty { break }  // the blank line: the end of the head
            guard fields.count < maximumFieldCount else { throw UpstreamResponseError.tooManyFields }
            let field = try Self.field(bytes, line)
            fields.append(field)
            let name = bytes[field.name]
            if Self.equalsLowercased(name, "content-length") {
                lengthSent = true
                let length = try Self.contentLength(bytes, field.value)
                guard contentLength == nil || contentLength == length else { throw UpstreamResponseError.invalidContentLength }
                contentLength = length
            } else if Self.equalsLowercased(name, "transfer-encoding") {
                transferCodings = true
                var index = field.value.lowerBound
                var last: ArraySlice<UInt8>?
                while let token = Self.nextToken(bytes, field.value, &index) { last = token }
                lastCodingIsChunked = last.map { Self.equalsLowercased($0, "chunked") } ?? false
            } else if Self.equalsLowercased(name, "connection") {
                var index = field.value.lowerBound
                while let token = Self.nextToken(bytes, field.value, &index) {
                    if Self.equalsLowercased(token, "close") { closes = true }
                    if Self.equalsLowercased(token, "keep-alive") { keepAliveToken = true }
                }
            }
        }
        guard sawStatusLine else { throw UpstreamResponseError.invalidStatusLine }
        // A transfer coding overrides a length (RFC 9112 §6.3); the pair is a sign of smuggling,
        // so such a connection is never reused, and the length is not relayed.
        if transferCodings { contentLength = nil }
        let framing: UpstreamResponseHead.Framing
        if answersHEAD || status == 204 || status == 304 || status < 200 {
            framing = .none
        } else if transferCodings {
            framing = lastCodingIsChunked ? .chunked : .untilClose
        } else if let contentLength {
            framing = contentLength == 0 ? .none : .length(contentLength)
        } else {
            framing = .untilClose
        }
        let persistent = minorVersion >= 1 ? !closes : (keepAliveToken && !closes)
        let keepAlive = persistent && !(transferCodings && lengthSent) && framing != .untilClose
        spareFields = fields
        return UpstreamResponseHead(
            bytes: bytes, status: status, reason: reason, fields: fields, framing: framing, keepAlive: keepAlive, contentLength: contentLength)
    }

    /// `spare`'s storage, emptied, leaving `spare` empty: unique (so written in place) once no
    /// head made from it is held any more.
    private static func take<Element>(_ spare: inout [Element]) -> [Element] {
        var taken: [Element] = []
        swap(&taken, &spare)
        taken.removeAll(keepingCapacity: true)
        return taken
    }

    /// `HTTP/1.x SP 3DIGIT [SP reason]`: the minor version, the status and the reason's range.
    private static func statusLine(_ bytes: [UInt8], _ line: Range<Int>) throws(UpstreamResponseError) -> (Int, Int, Range<Int>) {
        let start = line.lowerBound
        guard line.count >= 12,
            bytes[start] == UInt8(ascii: "H"), bytes[start + 1] == UInt8(ascii: "T"), bytes[start + 2] == UInt8(ascii: "T"),
            bytes[start + 3] == UInt8(ascii: "P"), bytes[start + 4] == UInt8(ascii: "/"), bytes[start + 5] == UInt8(ascii: "1"),
            bytes[start + 6] == UInt8(ascii: "."), isDigit(bytes[start + 7]), bytes[start + 8] == UInt8(ascii: " "),
            isDigit(bytes[start + 9]), isDigit(bytes[start + 10]), isDigit(bytes[start + 11])
        else { throw UpstreamResponseError.invalidStatusLine }
        let status = Int(bytes[start + 9] - 0x30) * 100 + Int(bytes[start + 10] - 0x30) * 10 + Int(bytes[start + 11] - 0x30)
        guard status >= 100 else { throw UpstreamResponseError.invalidStatusLine }
        var reason = line.upperBound..<line.upperBound
        if line.count > 12 {
            guard bytes[start + 12] == UInt8(ascii: " ") else { throw UpstreamResponseError.invalidStatusLine }
            reason = (start + 13)..<line.upperBound
            for index in reason where !isFieldValueByte(bytes[index]) { throw UpstreamResponseError.invalidStatusLine }
        }
        return (Int(bytes[start + 7] - 0x30), status, reason)
    }

    /// `name ":" OWS value OWS`, the name a token, the value with no control character but tab.
    private static func field(_ bytes: [UInt8], _ line: Range<Int>) throws(UpstreamResponseError) -> UpstreamResponseHead.Field {
        var colon = line.lowerBound
        while colon < line.upperBound && bytes[colon] != UInt8(ascii: ":") {
            guard isTokenByte(bytes[colon]) else { throw UpstreamResponseError.invalidField }  // obs-fold's leading space too
            colon += 1
        }
        guard colon > line.lowerBound, colon < line.upperBound else { throw UpstreamResponseError.invalidField }
        var valueStart = colon + 1
        var valueEnd = line.upperBound
        while valueStart < valueEnd && isWhitespace(bytes[valueStart]) { valueStart += 1 }
        while valueEnd > valueStart && isWhitespace(bytes[valueEnd - 1]) { valueEnd -= 1 }
        for index in valueStart..<valueEnd where !isFieldValueByte(bytes[index]) { throw UpstreamResponseError.invalidField }
        return UpstreamResponseHead.Field(name: line.lowerBound..<colon, value: valueStart..<valueEnd)
    }

    /// A `Content-Length` value: one decimal number, or a list of the same number repeated (RFC 9110 §8.6).
    private static func contentLength(_ bytes: [UInt8], _ value: Range<Int>) throws(UpstreamResponseError) -> Int {
        var result: Int?
        var index = value.lowerBound
        while let token = nextToken(bytes, value, &index) {
            guard !token.isEmpty, token.count <= 18, token.allSatisfy(isDigit) else { throw UpstreamResponseError.invalidContentLength }
            let number = token.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard result == nil || result == number else { throw UpstreamResponseError.invalidContentLength }
            result = number
        }
        guard let result else { throw UpstreamResponseError.invalidContentLength }
        return result
    }

    /// A chunk's size (hex, at most 15 digits) from its line; extensions after `;` are ignored.
    private static func chunkSize(_ line: [UInt8]) throws(UpstreamResponseError) -> Int {
        var size = 0
        var digits = 0
        var index = 0
        while index < line.count, let value = hexValue(line[index]) {
            // Counted before multiplying: a long run of digits must not overflow.
            guard digits < 15 else { throw UpstreamResponseError.invalidChunk }
            size = size * 16 + value
            digits += 1
            index += 1
        }
        guard digits > 0 else { throw UpstreamResponseError.invalidChunk }
        while index < line.count && isWhitespace(line[index]) { index += 1 }
        guard index == line.count || line[index] == UInt8(ascii: ";") else { throw UpstreamResponseError.invalidChunk }
        for byte in line[index...] where !isFieldValueByte(byte) { throw UpstreamResponseError.invalidChunk }
        return size
    }

    /// A line ending in LF (a CR before it dropped), with what came before in `pending`; `nil` until it ends.
    private mutating func readLine(_ bytes: UnsafeRawBufferPointer, from index: inout Int, limit: Int) throws(UpstreamResponseError) -> [UInt8]? {
        let start = index
        var position = index
        while position < bytes.count && bytes[position] != 0x0A { position += 1 }
        let complete = position < bytes.count
        guard pending.count + (position - start) <= limit + 1 else {
            throw limit == 2 || limit == Self.maximumChunkLineBytes ? UpstreamResponseError.invalidChunk : UpstreamResponseError.headTooLarge
        }
        pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<position]))
        guard complete else {
            index = position
            return nil
        }
        index = position + 1
        var line = pending
        pending.removeAll(keepingCapacity: true)
        if line.last == 0x0D { line.removeLast() }
        guard !line.contains(0x0D) else { throw UpstreamResponseError.invalidChunk }
        return line
    }

    // MARK: Bytes

    /// The next comma-separated element of the field value at `value` in `bytes`, trimmed of spaces
    /// and tabs (possibly empty), from `index` on; `nil` after the last. Allocates nothing.
    static func nextToken(_ bytes: [UInt8], _ value: Range<Int>, _ index: inout Int) -> ArraySlice<UInt8>? {
        guard index <= value.upperBound else { return nil }
        var start = index
        var end = start
        while end < value.upperBound && bytes[end] != UInt8(ascii: ",") { end += 1 }
        index = end + 1
        var last = end
        while start < last && isWhitespace(bytes[start]) { start += 1 }
        while last > start && isWhitespace(bytes[last - 1]) { last -= 1 }
        return bytes[start..<last]
    }

    /// Whether `bytes`, lower-cased (ASCII), are `lowercased`.
    static func equalsLowercased(_ bytes: ArraySlice<UInt8>, _ lowercased: StaticString) -> Bool {
        guard bytes.count == lowercased.utf8CodeUnitCount else { return false }
        return lowercased.withUTF8Buffer { word in
            zip(bytes, word).allSatisfy { (($0 >= 0x41 && $0 <= 0x5A) ? $0 + 32 : $0) == $1 }
        }
    }

    static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    static func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    /// A field value's byte: tab, space, visible ASCII or obs-text (RFC 9110 §5.5).
    static func isFieldValueByte(_ byte: UInt8) -> Bool { byte == 0x09 || (byte >= 0x20 && byte != 0x7F) }

    /// A `tchar` (RFC 9110 §5.6.2).
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(byte - 0x30)
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(byte - 0x61 + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(byte - 0x41 + 10)
        default: return nil
        }
    }
}
