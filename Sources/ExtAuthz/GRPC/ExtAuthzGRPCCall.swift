import NIOCore
import Traces

/// One unary call on the gRPC listener, from its opening `HEADERS` to its answer: the method it
/// names, and its one length-prefixed message as its `DATA` frames bring it.
struct ExtAuthzGRPCCall {
    /// The methods served; any other path is answered `UNIMPLEMENTED` before a byte is read.
    enum Method {
        /// `envoy.service.auth.v3.Authorization/Check`.
        case check
        /// `grpc.health.v1.Health/Check`, for the mesh's probes.
        case health

        /// The largest message the method takes: a check is a few KiB, with a buffered body at
        /// most 1 MiB (as over HTTP); a health check names a service.
        var maximumMessageBytes: Int {
            switch self {
            case .check: ExtAuthzGRPCCall.maximumMessageBytes
            case .health: 1024
            }
        }
    }

    enum State {
        /// The request's `DATA` is still arriving.
        case receiving
        /// The message was read; its answer is being made (a decision may wait for a store).
        case deciding
        /// Answered: the stream's later frames are dropped until it closes.
        case answered
        /// Answered before its request ended (refused at its `HEADERS`): what it still sends is
        /// dropped, and its window given back, so that the request can end and the stream close.
        case draining
    }

    /// The largest message any method takes.
    static let maximumMessageBytes = 1 << 20
    /// How long a request may take to arrive (or, refused, to end): a check is one small message,
    /// sent at once; a stream left open would keep its connection from ever being idle.
    static let receiveTimeout = TimeAmount.seconds(10)
    /// How long an answered stream may stay open: its answer waits on the caller's flow-control
    /// window, which a caller could keep shut.
    static let closeTimeout = TimeAmount.seconds(10)
    /// What a call refused at its `HEADERS` may still send before it is reset.
    static let maximumDrainedBytes = 1 << 20

    let method: Method
    /// The `traceparent` and `tracestate` the caller sent (Envoy's span, when its tracing is on).
    let askerTrace: TraceContextFields
    /// When the request must have arrived by (`receiveTimeout` after its `HEADERS`); once answered,
    /// when the stream must have closed (`closeTimeout` after the answer).
    var deadline: NIODeadline
    var state = State.receiving
    /// What the call has sent so far: the 5-byte prefix (compressed flag, length) and the message,
    /// in a buffer of its own (never a slice holding the connection's read buffer).
    private var received: ByteBuffer?
    /// Bytes dropped while `draining`.
    private(set) var drained = 0

    init(method: Method, askerTrace: TraceContextFields, deadline: NIODeadline) {
        self.method = method
        self.askerTrace = askerTrace
        self.deadline = deadline
    }

    /// A stream answered at its `HEADERS`: `.draining` while its request goes on, else `.answered`
    /// (its method is not read again).
    static func refused(state: State, deadline: NIODeadline) -> ExtAuthzGRPCCall {
        var call = ExtAuthzGRPCCall(method: .check, askerTrace: TraceContextFields(), deadline: deadline)
        call.state = state
        return call
    }

    /// The bytes this call holds.
    var heldBytes: Int { received?.readableBytes ?? 0 }

    /// Adds a `DATA` frame's bytes.
    ///
    /// - Throws: `ExtAuthzGRPCFailure.tooLarge` once the call has sent, or its prefix declares, more
    ///   than its method's largest message, before more is kept.
    mutating func append(_ bytes: inout ByteBuffer) throws(ExtAuthzGRPCFailure) {
        let limit = method.maximumMessageBytes + 5
        guard heldBytes + bytes.readableBytes <= limit else { throw .tooLarge }
        if received == nil {
            received = ByteBufferAllocator().buffer(capacity: bytes.readableBytes)
        }
        let before = heldBytes
        received?.writeBuffer(&bytes)
        // Once the prefix is whole its length is checked. No room is made for what it declares: the
        // buffer grows with what arrives, so memory follows the bytes a caller has sent.
        if before < 5, let declared = received.flatMap({ $0.getInteger(at: $0.readerIndex + 1, as: UInt32.self) }) {
            guard Int(declared) + 5 <= limit else { throw .tooLarge }
        }
    }

    /// Counts bytes dropped while draining: `false` once past `maximumDrainedBytes`.
    mutating func drop(_ count: Int) -> Bool {
        drained += count
        return drained <= Self.maximumDrainedBytes
    }

    /// The call's one message, once the call has ended; the call keeps no bytes after.
    ///
    /// - Throws: `ExtAuthzGRPCFailure` for no message, a compressed one, more than one, or an end
    ///   inside one.
    mutating func takeMessage() throws(ExtAuthzGRPCFailure) -> [UInt8] {
        defer { received = nil }
        guard var bytes = received, let flag = bytes.readInteger(as: UInt8.self) else { throw .noMessage }
        guard flag == 0 else { throw flag == 1 ? .compressed : .malformed }
        guard let length = bytes.readInteger(as: UInt32.self), let message = bytes.readBytes(length: Int(length)) else { throw .malformed }
        guard bytes.readableBytes == 0 else { throw .moreThanOneMessage }
        return message
    }

    /// Lets go of what the call holds (its answer made without it, or its stream gone).
    mutating func release() {
        received = nil
    }
}
