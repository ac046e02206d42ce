/// The state machine of an execution: accepted -> running -> completed | failed.
public enum ExecutionStatus: String, Sendable, CaseIterable {
    case accepted, running, completed, failed
}
