// HPACK's Huffman decoding of one large field, as every HTTP/2 request's `authorization` is
// decoded (nghttp2-based clients never index it), three ways (scripts/bench-hpack-huffman.sh):
//  - swift-nio-hpack's loop as in 1.46.0 (`ByteBuffer.getHuffmanEncodedString`), over a byte array:
//    a 4-bit state machine, two dependent table reads a byte;
//  - the same machine, its table packed one UInt32 an entry and read without bounds checks;
//  - a byte a step: the two 4-bit steps folded into one table of 256 states by 256 bytes (256 KiB).
// Each is checked against the others on the field and on 20,000 corrupted copies (the same
// answer, or the same refusal), then timed: the best of 7 runs of 200,000 decodes.
// Compiled with swift-nio-hpack's own HuffmanTables.swift (its decoder table), from the checkout.
import Foundation

let decoderTable = HuffmanDecoderTable()

struct Failure: Error {}

func stock(_ bytes: [UInt8]) throws -> String {
    let length = bytes.count
    return try String(unsafeUninitializedCapacity: length * 2) { backingStorage in
        var state: UInt8 = 0
        var offset = 0
        var acceptable = false
        for ch in bytes {
            var t = decoderTable[state: state, nybble: ch >> 4]
            if t.flags.contains(.failure) { throw Failure() }
            if t.flags.contains(.symbol) { backingStorage[offset] = t.sym; offset &+= 1 }
            t = decoderTable[state: t.state, nybble: ch & 0xf]
            if t.flags.contains(.failure) { throw Failure() }
            if t.flags.contains(.symbol) { backingStorage[offset] = t.sym; offset &+= 1 }
            state = t.state
            acceptable = t.flags.contains(.accepted)
        }
        guard acceptable else { throw Failure() }
        return offset
    }
}

/// The candidate: the same state machine, its table packed as one UInt32 an entry (state, flags,
/// symbol) in memory read without bounds checks, copied once at start-up.
let packed: UnsafeBufferPointer<UInt32> = {
    let table = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: 256 * 16)
    for state in 0..<256 {
        for nybble in 0..<16 {
            let t = decoderTable[state: UInt8(state), nybble: UInt8(nybble)]
            table[state * 16 + nybble] = UInt32(t.state) | UInt32(t.flags.rawValue) << 8 | UInt32(t.sym) << 16
        }
    }
    return UnsafeBufferPointer(table)
}()

func candidate(_ bytes: [UInt8]) throws -> String {
    let table = packed
    return try String(unsafeUninitializedCapacity: bytes.count * 2) { out in
        var state: UInt32 = 0
        var offset = 0
        var flags: UInt32 = 0
        try bytes.withUnsafeBufferPointer { input in
            for ch in input {
                var t = table[Int(state << 4 | UInt32(ch >> 4))]
                if t & 0x400 != 0 { throw Failure() }
                if t & 0x200 != 0 { out[offset] = UInt8(truncatingIfNeeded: t >> 16); offset &+= 1 }
                t = table[Int((t & 0xff) << 4 | UInt32(ch & 0xf))]
                if t & 0x400 != 0 { throw Failure() }
                if t & 0x200 != 0 { out[offset] = UInt8(truncatingIfNeeded: t >> 16); offset &+= 1 }
                state = t & 0xff
                flags = t
            }
        }
        guard flags & 0x100 != 0 else { throw Failure() }
        return offset
    }
}


/// Candidate two: a byte a step. The 4-bit machine's two steps folded into one table of 256 states
/// by 256 bytes (256 KiB): next state (8 bits), failure (bit 8), accepted (bit 9), symbols emitted
/// (bits 10-11), the symbols (bits 12-19, 20-27).
let byteTable: UnsafeBufferPointer<UInt32> = {
    let table = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: 256 * 256)
    for state in 0..<256 {
        for byte in 0..<256 {
            var entry: UInt32 = 0
            var count: UInt32 = 0
            let t1 = decoderTable[state: UInt8(state), nybble: UInt8(byte >> 4)]
            if t1.flags.contains(.failure) { table[state * 256 + byte] = 0x100; continue }
            if t1.flags.contains(.symbol) { entry |= UInt32(t1.sym) << 12; count += 1 }
            let t2 = decoderTable[state: t1.state, nybble: UInt8(byte & 0xf)]
            if t2.flags.contains(.failure) { table[state * 256 + byte] = 0x100; continue }
            if t2.flags.contains(.symbol) { entry |= UInt32(t2.sym) << (12 + 8 * count); count += 1 }
            entry |= UInt32(t2.state) | (t2.flags.contains(.accepted) ? 0x200 : 0) | count << 10
            table[state * 256 + byte] = entry
        }
    }
    return UnsafeBufferPointer(table)
}()

func byteAStep(_ bytes: [UInt8]) throws -> String {
    let table = byteTable
    return try String(unsafeUninitializedCapacity: bytes.count * 2) { out in
        var t: UInt32 = 0
        var offset = 0
        try bytes.withUnsafeBufferPointer { input in
            for ch in input {
                t = table[Int((t & 0xff) << 8 | UInt32(ch))]
                if t & 0x100 != 0 { throw Failure() }
                // Both symbol slots are written; the count says how many were meant (capacity is 2x the input).
                out[offset] = UInt8(truncatingIfNeeded: t >> 12)
                out[offset &+ 1] = UInt8(truncatingIfNeeded: t >> 20)
                offset &+= Int((t >> 10) & 3)
            }
        }
        guard t & 0x200 != 0 else { throw Failure() }
        return offset
    }
}

func encode(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    var acc: UInt64 = 0, bits = 0
    for ch in text.utf8 {
        let e = StaticHuffmanTable[Int(ch)]
        acc = acc << UInt64(e.nbits) | UInt64(e.bits); bits += e.nbits
        while bits >= 8 { out.append(UInt8(truncatingIfNeeded: acc >> UInt64(bits - 8))); bits -= 8 }
    }
    if bits > 0 { out.append(UInt8(truncatingIfNeeded: (acc << UInt64(8 - bits)) | ((1 << UInt64(8 - bits)) - 1))) }
    return out
}

var token = "Bearer eyJhbGciOiJFUzI1NiIsImtpZCI6ImE3ZjMiLCJ0eXAiOiJKV1QifQ."
let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
var seed: UInt64 = 42
let characters = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 442
while token.utf8.count < characters { seed = seed &* 6364136223846793005 &+ 1; token.append(alphabet[Int(seed >> 58)]) }
let encoded = encode(token)
let a = try! stock(encoded), b = try! candidate(encoded), c = try! byteAStep(encoded)
precondition(a == token && b == token && c == token)
var bad = encoded; bad[bad.count - 1] = 0
precondition((try? stock(bad)) == nil && (try? candidate(bad)) == nil && (try? byteAStep(bad)) == nil)
for n in 0..<20000 { var r = encoded; seed = seed &* 6364136223846793005 &+ 1; r[Int(seed >> 33) % r.count] ^= UInt8(truncatingIfNeeded: seed >> 20) | 1; r = Array(r.prefix(max(1, r.count - n % 3))); precondition((try? stock(r)) == (try? byteAStep(r)) && (try? stock(r)) == (try? candidate(r)), "differs") }

print("the three decoders agree on the field and on 20,000 corrupted copies")
func time(_ name: String, _ body: ([UInt8]) throws -> String) {
    var best = Double.infinity
    var sink = 0
    for _ in 0..<7 {
        let n = 200_000
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<n { sink &+= try! body(encoded).utf8.count }
        best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start) / Double(n))
    }
    print("\(name): \(String(format: "%.0f", best)) ns a field (\(token.utf8.count) characters, \(encoded.count) bytes coded), sink \(sink % 7)")
}
time("NIOHPACK (swift-nio-http2 1.46.0)", stock)
time("candidate", candidate)
time("a byte a step", byteAStep)
time("NIOHPACK (swift-nio-http2 1.46.0)", stock)
time("candidate", candidate)
time("a byte a step", byteAStep)
