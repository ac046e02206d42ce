/// Why a request target was refused: a stable code and one sentence to act on.
///
/// Every one is answered 400 `invalid_request` with this message; the code is
/// for logs and tests.
public enum RequestTargetError: String, Error, Sendable, CaseIterable {
    case notOriginForm = "not_origin_form"
    case climbsAboveRoot = "climbs_above_root"
    case encodedSlash = "encoded_slash"
    case encodedBackslash = "encoded_backslash"
    case encodedNUL = "encoded_nul"
    case backslash = "backslash"
    case dotSegmentWithParameters = "dot_segment_with_parameters"
    case malformedEscape = "malformed_escape"
    case invalidCharacter = "invalid_character"
    case invalidQueryCharacter = "invalid_query_character"

    /// The stable code.
    public var code: String { rawValue }

    /// One sentence saying what is wrong with the target and what to send instead.
    public var message: String {
        switch self {
        case .notOriginForm: "the request target must be a path starting with /"
        case .climbsAboveRoot: "the path climbs above / with .. segments; send the path it means"
        case .encodedSlash: "the path holds an encoded slash (%2F), which the gateway does not route; send / or encode the data in the query"
        case .encodedBackslash: "the path holds an encoded backslash (%5C), which the gateway does not route"
        case .encodedNUL: "the path holds an encoded NUL byte (%00)"
        case .backslash: "the path holds a backslash; use / between segments or encode it in the query"
        case .dotSegmentWithParameters: "the path holds a . or .. segment with parameters (such as ..;x), which some servers read as .."
        case .malformedEscape: "the path holds a % that is not followed by two hexadecimal digits"
        case .invalidCharacter: "the path holds a character that must be percent-encoded (a control, space, #, or non-ASCII byte)"
        case .invalidQueryCharacter: "the query holds a character that must be percent-encoded (a control, space, #, or non-ASCII byte)"
        }
    }
}
