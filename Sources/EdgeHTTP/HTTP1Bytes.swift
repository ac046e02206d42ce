import NIOCore
import NIOHTTP1

/// HTTP/1.1 written as bytes by the proxy: field lines and chunked framing, straight into
/// `ByteBuffer`s, for the request head it sends upstream and the answer it relays.
///
/// Every name and value written here was checked before: taken from NIO's parser (which refuses
/// CR, LF and other controls), from `PlainRequestHead` (visible ASCII only), from
/// `UpstreamResponseParser` (no CR, LF or other controls), or the gateway's own.
package enum HTTP1Bytes {
    /// The blank line that ends a head, and the end of a chunked body (the last chunk, no trailers).
    package static let crlf = ByteBuffer(string: "\r\n")
    package static let lastChunk = ByteBuffer(string: "0\r\n\r\n")

    /// The last chunk with a trailer section (RFC 9112 §7.1.2): an HTTP/2 upstream's trailers, to an HTTP/1.1 client.
    package static func lastChunk(trailers: HTTPHeaders) -> ByteBuffer {
        var buffer = ByteBuffer(string: "0\r\n")
        for (name, value) in trailers { writeField(name, value, into: &buffer) }
        buffer.writeStaticString("\r\n")
        return buffer
    }

    /// `name: value` and its CRLF.
    package static func writeField(_ name: String, _ value: String, into buffer: inout ByteBuffer) {
        buffer.writeString(name)
        buffer.writeStaticString(": ")
        buffer.writeString(value)
        buffer.writeStaticString("\r\n")
    }

    /// `name: value` and its CRLF, the value a number.
    package static func writeField(_ name: StaticString, number: Int, into buffer: inout ByteBuffer) {
        buffer.writeStaticString(name)
        buffer.writeStaticString(": ")
        writeDecimal(number, into: &buffer)
        buffer.writeStaticString("\r\n")
    }

    /// A non-negative number in decimal, with no String made for it.
    package static func writeDecimal(_ number: Int, into buffer: inout ByteBuffer) {
        var divisor = 1
        while divisor <= number / 10 { divisor *= 10 }
        var rest = max(0, number)
        while divisor > 0 {
            buffer.writeInteger(UInt8(0x30 + rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    /// A response head written by the gateway (a refusal, 100 Continue): status line, fields, blank line.
    package static func responseHead(_ head: HTTPResponseHead, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 64 + 40 * head.headers.count)
        buffer.writeStaticString("HTTP/1.1 ")
        writeDecimal(Int(head.status.code), into: &buffer)
        buffer.writeStaticString(" ")
        buffer.writeString(head.status.reasonPhrase)
        buffer.writeStaticString("\r\n")
        for (name, value) in head.headers { writeField(name, value, into: &buffer) }
        buffer.writeStaticString("\r\n")
        return buffer
    }

    /// A chunk's size line: the size in hex and CRLF.
    package static func chunkHeader(_ size: Int, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 18)
        var shift = (Int.bitWidth - size.leadingZeroBitCount + 3) / 4 * 4 - 4
        if size == 0 { shift = 0 }
        while shift >= 0 {
            let digit = UInt8((size >> shift) & 0xF)
            buffer.writeInteger(digit < 10 ? 0x30 + digit : 0x61 + digit - 10)
            shift -= 4
        }
        buffer.writeStaticString("\r\n")
        return buffer
    }
}
