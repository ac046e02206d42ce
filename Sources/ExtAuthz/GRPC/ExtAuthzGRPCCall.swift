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

    /// A message's largest size: a check is a few KiB, with a buffered body at most 1 MiB, as over HTTP.
    static let maximumMessageBytes = 1 << 20

    let method: Method
    /// The `traceparent` and `tracestate` the caller sent (Envoy's span, when its tracing is on).
    let askerTrace: TraceContextFields
    var state = State.receiving
    /// What the call has sent so far: the 5-byte prefix (compressed flag, length) and the message.
    private var received: ByteBuffer?

    init(method: Method, askerTrace: TraceContextFields) {
        self.method = method
        self.askerTrace = askerTrace
    }

    /// A stream answered at its `HEADERS` whose request has not ended (`State.draining`).
    static func draining(_ method: Method) -> ExtAuthzGRPCCall {
        var call = ExtAuthzGRPCCall(method: method, askerTrace: TraceContextFields())
        call.state = .draining
        return call
    }

    /// Adds a `DATA` frame's bytes.
    ///
    /// - Throws: `ExtAuthzGRPCFailure.tooLarge` once the call has sent more than one message of
    ///   the largest size could hold, before more is kept.
    mutating func append(_ bytes: inout ByteBuffer) throws(ExtAuthzGRPCFailure) {
        guard (received?.readableBytes ?? 0) + bytes.readableBytes <= Self.maximumMessageBytes + 5 else { throw .tooLarge }
        if received == nil {
            received = bytes
        } else {
            received?.writeBuffer(&bytes)
        }
    }

    /// The call's one message, once the call has ended.
    ///
    /// - Throws: `ExtAuthzGRPCFailure` for no message, a compressed one, more than one, or an end
    ///   inside one.
    func message() throws(ExtAuthzGRPCFailure) -> [UInt8] {
        guard var bytes = received, let flag = bytes.readInteger(as: UInt8.self) else { throw .noMessage }
        guard flag == 0 else { throw flag == 1 ? .compressed : .malformed }
        guard let length = bytes.readInteger(as: UInt32.self), let message = bytes.readBytes(length: Int(length)) else { throw .malformed }
        guard bytes.readableBytes == 0 else { throw .moreThanOneMessage }
        return message
    }
}
