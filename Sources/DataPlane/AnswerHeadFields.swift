import NIOHPACK
import NIOHTTP1

/// Where a relayed answer's head fields go: NIO's HTTP/1 head (a stream channel's codec frames it
/// after the exchange), or a route stream's HPACK fields (`HTTP2RouteStream`), built straight from
/// the upstream's bytes with no `HTTPHeaders` between.
protocol AnswerHeadFields {
    /// A field of the upstream's head that goes back to the client.
    mutating func add(_ field: UpstreamResponseHead.Field, of response: UpstreamResponseHead)
    /// A field the gateway adds to the answer.
    mutating func add(_ field: GatewayAnswerField, value: String)
}

/// The fields the gateway adds to a relayed answer's head.
enum GatewayAnswerField {
    case contentLength
    case requestID
    case allowOrigin
    case vary

    /// As written in an HTTP/1.1 head.
    var http1Name: String {
        switch self {
        case .contentLength: "Content-Length"
        case .requestID: "X-Request-Id"
        case .allowOrigin: "Access-Control-Allow-Origin"
        case .vary: "Vary"
        }
    }

    /// As HTTP/2 spells it (lower case).
    var http2Name: String {
        switch self {
        case .contentLength: "content-length"
        case .requestID: "x-request-id"
        case .allowOrigin: "access-control-allow-origin"
        case .vary: "vary"
        }
    }
}

extension HTTPHeaders: AnswerHeadFields {
    mutating func add(_ field: UpstreamResponseHead.Field, of response: UpstreamResponseHead) {
        add(name: response.nameString(of: field), value: response.valueString(of: field))
    }

    mutating func add(_ field: GatewayAnswerField, value: String) {
        add(name: field.http1Name, value: value)
    }
}

extension HPACKHeaders: AnswerHeadFields {
    /// The name lower-cased, as HTTP/2 requires. The fields that reach here are the screen's
    /// returnable ones (`HeaderScreen.isReturnable`): none is connection-specific.
    mutating func add(_ field: UpstreamResponseHead.Field, of response: UpstreamResponseHead) {
        add(name: response.lowercasedNameString(of: field), value: response.valueString(of: field))
    }

    /// The request id, new for every answer, stays out of HPACK's table, where it would only push
    /// out fields that repeat.
    mutating func add(_ field: GatewayAnswerField, value: String) {
        add(name: field.http2Name, value: value, indexing: field == .requestID ? .nonIndexable : .indexable)
    }
}
