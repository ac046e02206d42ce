/// `MCPListFilter` over an SSE answer (`text/event-stream`): events pass whole, as they complete,
/// and those carrying a filtered list's response are filtered.
///
/// An event is held until its blank line comes (never forwarded in part), up to
/// `MCPListFilter.maximumBytes`. Every event is read, after the response too: on one request's
/// answer a response to another id ends the stream (a client would take it for that request's
/// answer, a list nobody filtered). An event whose data is not JSON ends the stream: it is never
/// passed unread.
public struct MCPEventStreamFilter: Sendable {
    public let filter: MCPListFilter
    private var pending: [UInt8] = []
    /// Where the scan of `pending` stopped, and where its current line and event began.
    private var scanned = 0
    private var lineStart = 0
    private var eventStart = 0
    /// Whether the stream's first bytes were read: byte order marks there are dropped, as the
    /// SSE standard has clients drop one (so `\u{FEFF}data:` is a data line to them and here).
    private var started = false

    /// Why the stream must end: an event larger than the gateway holds, or one it cannot read.
    public enum Failure: Error, Sendable {
        case tooLarge
        case unreadable
    }

    public init(filter: MCPListFilter) {
        self.filter = filter
    }

    /// The complete events among what came so far (and `bytes`), filtered, as bytes to send on.
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(Failure) -> [UInt8] {
        pending.append(contentsOf: bytes)
        // Every mark leading the stream goes: passed on, the one after the first would lead what the
        // client decodes, and be dropped there, its line then a data line the gateway did not read.
        while !started {
            let mark: [UInt8] = [0xEF, 0xBB, 0xBF]
            if pending.count < 3, mark.starts(with: pending) { return [] }  // a mark may be on its way
            guard pending.starts(with: mark) else {
                started = true
                break
            }
            pending.removeFirst(3)
        }
        var out: [UInt8] = []
        var index = scanned
        while index < pending.count {
            let byte = pending[index]
            guard byte == 0x0A || byte == 0x0D else {
                index += 1
                continue
            }
            var terminator = 1
            if byte == 0x0D {
                guard index + 1 < pending.count else { break }  // a CR at the end: its LF may follow
                if pending[index + 1] == 0x0A { terminator = 2 }
            }
            let blank = index == lineStart
            index += terminator
            lineStart = index
            if blank {
                out.append(contentsOf: try event(pending[eventStart..<index]))
                eventStart = index
            }
        }
        // What was passed on goes; the scan goes on from where it stopped.
        pending.removeFirst(eventStart)
        scanned = index - eventStart
        lineStart -= eventStart
        eventStart = 0
        guard pending.count <= MCPListFilter.maximumBytes else { throw .tooLarge }
        return out
    }

    /// What is passed when the stream ends: nothing. An event without its blank line is one the
    /// SSE standard discards, but a client that dispatched it anyway would read a list the gateway
    /// never filtered; it is dropped unread.
    public mutating func finish() -> [UInt8] {
        (pending, scanned, lineStart, eventStart) = ([], 0, 0, 0)
        return []
    }

    /// One whole event (its blank line included), filtered when it carries a filtered list's response.
    private mutating func event(_ bytes: ArraySlice<UInt8>) throws(Failure) -> [UInt8] {
        var lines: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == 0x0A || bytes[index] == 0x0D {
                lines.append(bytes[start..<index])
                if bytes[index] == 0x0D, index + 1 < bytes.endIndex, bytes[index + 1] == 0x0A { index += 1 }
                start = index + 1
            }
            index += 1
        }
        let dataPrefix = Array("data:".utf8)
        var document: [UInt8] = []
        var dataLines = 0
        for line in lines where line.starts(with: dataPrefix) {
            if dataLines > 0 { document.append(0x0A) }
            var value = line.dropFirst(dataPrefix.count)
            if value.first == 0x20 { value = value.dropFirst() }
            document.append(contentsOf: value)
            dataLines += 1
        }
        // No data, or empty data (a priming event carrying only its id): nothing to filter.
        guard dataLines > 0, document.contains(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) else { return Array(bytes) }
        let filtered: [UInt8]?
        do {
            filtered = try filter.filtered(document)
        } catch {
            throw .unreadable
        }
        guard let filtered, filtered != document else { return Array(bytes) }
        var out: [UInt8] = []
        var wroteData = false
        for line in lines where !line.isEmpty {
            if line.starts(with: dataPrefix) {
                guard !wroteData else { continue }
                wroteData = true
                for part in filtered.split(separator: 0x0A, omittingEmptySubsequences: false) {
                    out.append(contentsOf: "data: ".utf8)
                    out.append(contentsOf: part)
                    out.append(0x0A)
                }
            } else {
                out.append(contentsOf: line)
                out.append(0x0A)
            }
        }
        out.append(0x0A)
        return out
    }
}
