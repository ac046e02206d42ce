import JOSE
import RuntimeAPI

/// One inbound agent-channel frame, parsed: the pure half of the protocol
/// (no I/O), so it can be tested and fuzzed on its own.
enum AgentFrame: Sendable {
    case ping
    case intent(requestID: String, IntentRequest)

    /// Why a frame was not understood: the error frame to answer with.
    struct Problem: Error, Sendable {
        let message: String
        let requestID: String?
    }

    /// Parses a text frame: a strict JSON object with `type` `ping` or `intent`.
    static func parse(_ text: String) throws(Problem) -> AgentFrame {
        let frame: JSONObject
        do {
            frame = try StrictJSONReader().parseObject(Array(text.utf8))
        } catch {
            throw Problem(message: "the frame is not a strict JSON object: \(error.message)", requestID: nil)
        }
        switch frame["type"]?.stringValue {
        case "ping":
            return .ping
        case "intent":
            guard let requestID = frame["request_id"]?.stringValue, !requestID.isEmpty, requestID.utf8.count <= 128 else {
                throw Problem(message: "an intent frame needs a request_id string of 1 to 128 bytes", requestID: nil)
            }
            do {
                return .intent(requestID: requestID, try IntentRequest(frame))
            } catch {
                throw Problem(message: error.message, requestID: requestID)
            }
        default:
            throw Problem(message: "the frame's type must be \"intent\" or \"ping\"", requestID: nil)
        }
    }
}
