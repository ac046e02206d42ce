import JOSE
import TrafficCop

/// An MCP route's rules for what its callers may do: per tool, prompt and resource, and per method.
///
/// The rules of a kind are read in order and the first whose name matches decides. A kind with
/// no rules configured (`tools` absent) lets every name through to the route's own policy; a kind
/// with rules refuses a name no rule matches. Methods are decided by `standardMethods` (always
/// allowed, the route's policy deciding), the named ones by their kind's rules, and any other only
/// when `methods` lists it.
public struct MCPCallPolicy: Sendable, Equatable {
    /// `tools`: rules for `tools/call` by `params.name`; `nil`: every tool.
    public var tools: [MCPRule]?
    /// `prompts`: rules for `prompts/get` by `params.name`; `nil`: every prompt.
    public var prompts: [MCPRule]?
    /// `resources`: rules for `resources/read`, `subscribe` and `unsubscribe` by `params.uri`; `nil`: every resource.
    public var resources: [MCPRule]?
    /// `methods`: methods allowed besides the standard ones (an extension's, a newer revision's).
    public var methods: [NamePattern]
    /// `max_body_bytes`: the largest request body the gateway reads to decide; a larger one is refused (413).
    public var maximumBodyBytes: Int

    /// 1 MiB: a tool's arguments may carry a document; beyond that the gateway would hold more per request than it should.
    public static let defaultMaximumBodyBytes = 1 << 20

    public init(tools: [MCPRule]? = nil, prompts: [MCPRule]? = nil, resources: [MCPRule]? = nil, methods: [NamePattern] = [], maximumBodyBytes: Int = defaultMaximumBodyBytes) {
        self.tools = tools
        self.prompts = prompts
        self.resources = resources
        self.methods = methods
        self.maximumBodyBytes = maximumBodyBytes
    }

    /// The methods a client sends a server in any revision the gateway supports (2025-03-26,
    /// 2025-06-18, 2025-11-25 and 2026-07-28: the union of `ClientRequest` and `ClientNotification`
    /// in each revision's schema.ts), decided by the route's policy alone: discovery and the
    /// lifecycle, the lists (filtered when their kind has rules), completion, logging,
    /// subscriptions, tasks and the notifications. A client of any of them meets no refusal
    /// that the server alone would not give.
    public static let standardMethods: Set<String> = [
        "server/discover", "initialize", "ping", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "completion/complete",
        "logging/setLevel", "subscriptions/listen", "tasks/get", "tasks/list", "tasks/result", "tasks/cancel",
        "notifications/initialized", "notifications/cancelled", "notifications/progress", "notifications/roots/list_changed",
        "notifications/elicitation/complete", "notifications/tasks/status",
    ]

    /// The methods decided by their kind's rules, by name.
    public static let namedMethods: Set<String> = ["tools/call", "prompts/get", "resources/read", "resources/subscribe", "resources/unsubscribe"]

    /// The scopes the rules ask for beyond the route's: offered at consent and in `scopes_supported`.
    public var ruleScopes: [String] {
        var scopes: [String] = []
        for rule in (tools ?? []) + (prompts ?? []) + (resources ?? []) {
            for scope in rule.scopes where !scopes.contains(scope) { scopes.append(scope) }
        }
        return scopes
    }

    /// Whether a list answer (`tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`) is filtered: its kind has rules.
    public func filtersList(_ method: String) -> Bool {
        switch method {
        case "tools/list": tools != nil
        case "prompts/list": prompts != nil
        case "resources/list", "resources/templates/list": resources != nil
        default: false
        }
    }

    /// Whether any list is filtered on this route (its SSE streams are then read for list answers too).
    public var filtersAnyList: Bool { tools != nil || prompts != nil || resources != nil }

    /// The metric labels of a message: its method when it is one the gateway knows (else the
    /// `methods` pattern that allowed it, else `_other`); the rule pattern that matched its name
    /// when its kind has rules (else `_unlisted`), or the name itself, at most 64 bytes, when it has none.
    /// A client chooses methods and names: the labels are bounded by the configuration.
    public func labels(_ message: MCPMessage) -> (method: String, name: String?) {
        guard let method = message.method else { return ("response", nil) }
        let methodLabel: String
        if Self.standardMethods.contains(method) || Self.namedMethods.contains(method) {
            methodLabel = method
        } else {
            methodLabel = methods.first(where: { $0.matches(method) })?.text ?? "_other"
        }
        guard let name = message.name else { return (methodLabel, nil) }
        let kind = message.completes == "ref/prompt" ? "prompts/get" : message.completes == "ref/resource" ? "resources/read" : method
        if let (rules, _) = rules(for: kind), let rules {
            return (methodLabel, rules.first(where: { $0.pattern.matches(name) })?.pattern.text ?? "_unlisted")
        }
        return (methodLabel, name.utf8.count <= 64 ? name : "_long")
    }

    /// The rules deciding the names a method acts on, with the word for what they name.
    private func rules(for method: String) -> (rules: [MCPRule]?, kind: String)? {
        switch method {
        case "tools/call", "tools/list": (tools, "tool")
        case "prompts/get", "prompts/list": (prompts, "prompt")
        case "resources/read", "resources/subscribe", "resources/unsubscribe", "resources/list", "resources/templates/list": (resources, "resource")
        default: nil
        }
    }

    /// The decision for one message of a caller the route admitted.
    ///
    /// - Parameters:
    ///   - claims: the verified token's claims (`scope` among them).
    ///   - routeScopes: the route's own scopes, named again in a step-up challenge.
    public func decide(_ message: MCPMessage, claims: JSONObject, tenantID: String, issuer: String?, hasSession: Bool, routeScopes: [String]) -> MCPDecision {
        guard let method = message.method else { return .allowed }  // the client's answer to the server
        // A filtered list sent as a notification: the server may answer it anyway, with no id to filter by.
        if message.kind == .notification, filtersList(method) {
            return .refused(.init(code: "mcp_list_refused", message: "send \(method) as a request (with an id): its answer is filtered, and a notification's could not be"))
        }
        // A completion is decided as the prompt or resource it completes the arguments of.
        let decidedAs = message.completes == "ref/prompt" ? "prompts/get" : message.completes == "ref/resource" ? "resources/read" : method
        if let name = message.name, let (rules, kind) = rules(for: decidedAs) {
            return decide(name: name, kind: kind, rules: rules, claims: claims, tenantID: tenantID, issuer: issuer, hasSession: hasSession, routeScopes: routeScopes)
        }
        if Self.standardMethods.contains(method) || methods.contains(where: { $0.matches(method) }) {
            return .allowed
        }
        return .refused(
            .init(
                code: "mcp_method_refused",
                message: "Method not found: the gateway does not pass the method \(MCPRequestHeaders.printable(method)) to this MCP server; its operator may allow it (mcp.methods)",
                rpcCode: JSONRPCErrorAnswer.methodNotFoundCode))
    }

    private func decide(
        name: String, kind: String, rules: [MCPRule]?, claims: JSONObject, tenantID: String, issuer: String?, hasSession: Bool, routeScopes: [String]
    ) -> MCPDecision {
        guard let rules else { return .allowed }
        guard let rule = rules.first(where: { $0.pattern.matches(name) }) else {
            return .refused(.init(code: "mcp_\(kind)_refused", message: "the \(kind) \(MCPRequestHeaders.printable(name)) is not open to anyone through this gateway"))
        }
        if let policy = rule.policy, let refusal = policy.refusal(claims: claims, tenantID: tenantID, issuer: issuer, hasSession: hasSession) {
            // The person is told which tool and that it is not theirs; what would pass goes to the log alone.
            return .refused(
                .init(
                    code: "mcp_\(kind)_refused",
                    message: "the \(kind) \(MCPRequestHeaders.printable(name)) is not open to you through this gateway; its operator can say why (the answer's X-Request-Id)",
                    detail: (refusal.detail ?? refusal.message).replacingOccurrences(of: "this route", with: "this \(kind)")))
        }
        let granted = claims["scope"]?.stringValue ?? ""
        let held = Set(granted.split(separator: " ").map(String.init))
        if !rule.scopes.allSatisfy(held.contains) {
            var needed = routeScopes
            for scope in rule.scopes where !needed.contains(scope) { needed.append(scope) }
            return .needsScopes(needed)
        }
        return .allowed
    }

    /// Whether a list entry's name is one the caller may use (its rule's `require` holds): the
    /// entries a list answer keeps. An entry whose rule asks for scopes the client lacks is kept,
    /// so that the agent can call it and be asked to step up.
    public func lists(name: String, method: String, claims: JSONObject, tenantID: String, issuer: String?, hasSession: Bool) -> Bool {
        guard let (rules, _) = rules(for: method), let rules else { return true }
        guard let rule = rules.first(where: { $0.pattern.matches(name) }) else { return false }
        guard let policy = rule.policy else { return true }
        return policy.refusal(claims: claims, tenantID: tenantID, issuer: issuer, hasSession: hasSession) == nil
    }
}

extension MCPCallPolicy {
    /// The decisions for every message of `body` and the body's: allowed when every message is;
    /// else a step-up for every scope any message lacks; else the refusal. A batch is decided
    /// element by element and forwarded whole or not at all.
    public func decide(_ body: MCPBody, claims: JSONObject, tenantID: String, issuer: String?, hasSession: Bool, routeScopes: [String]) -> (
        body: MCPDecision, messages: [MCPDecision]
    ) {
        let batched: Bool
        if case .batch = body { batched = true } else { batched = false }
        let decisions = body.messages.map { message -> MCPDecision in
            // A filtered list is answered on its own request only: in a batch its answer would be one of many.
            if batched, let method = message.method, filtersList(method) {
                return .refused(.init(code: "mcp_batch_refused", message: "send \(method) on its own, not in a batch: its answer is filtered"))
            }
            return decide(message, claims: claims, tenantID: tenantID, issuer: issuer, hasSession: hasSession, routeScopes: routeScopes)
        }
        var needed: [String] = []
        var refusal: MCPDecision?
        for decision in decisions {
            switch decision {
            case .allowed: continue
            case .needsScopes(let scopes): for scope in scopes where !needed.contains(scope) { needed.append(scope) }
            case .refused: if refusal == nil { refusal = decision }
            }
        }
        if !needed.isEmpty { return (.needsScopes(needed), decisions) }
        return (refusal ?? .allowed, decisions)
    }
}
