/// The answers one connection owes, oldest first, and for each whether it answers a `HEAD`
/// (then it carries no body, RFC 9110 §9.3.2).
///
/// Kept by `RequestTargetHandler`, which sees every request head NIO's decoder passes on and the
/// end of every answer, whoever wrote it: an answer through NIO's encoder ends with its `.end`, a
/// relayed one (bytes past the encoder) with `RequestTargetHandler.AnswerEnded`. NIO's own pairing
/// of decoder and encoder is not used: it counts only answers that pass through the encoder, so a
/// relayed answer left every later answer framed for an earlier request (issue 35). Here every
/// answer, however written, settles its own request, so the books hold exactly the requests still
/// unanswered: nothing per request outlives its answer.
///
/// Depends on nothing but the standard library (the fuzz target `answer-framing` compiles it alone).
/// Nothing is allocated while at most one request is owed; pipelined requests use one array,
/// reused.
package struct OwedAnswers {
    /// The oldest owed answer's request was a `HEAD`; meaningful while `count > 0`.
    private var oldestIsHEAD = false
    /// The requests after the oldest, in order: whether each is a `HEAD`.
    private var later: [Bool] = []
    /// Where the first of `later` still owed starts.
    private var laterStart = 0

    /// Answers owed.
    private(set) var count = 0

    /// A request was passed on; its answer is owed after all the earlier ones.
    mutating func owe(isHEAD: Bool) {
        if count == 0 {
            oldestIsHEAD = isHEAD
        } else {
            later.append(isHEAD)
        }
        count += 1
    }

    /// Whether the answer being written now (the oldest owed) answers a `HEAD`; `false` when none is owed.
    var currentAnswersHEAD: Bool { count > 0 && oldestIsHEAD }

    /// The oldest owed answer has ended: the next one is owed now.
    mutating func settle() {
        guard count > 0 else { return }
        count -= 1
        guard count > 0 else {
            later.removeAll(keepingCapacity: true)
            laterStart = 0
            return
        }
        oldestIsHEAD = later[laterStart]
        laterStart += 1
        if laterStart == later.count {
            later.removeAll(keepingCapacity: true)
            laterStart = 0
        }
    }
}
