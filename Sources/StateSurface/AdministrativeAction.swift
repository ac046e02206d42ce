import JOSE

/// An operator's action that leaves no row of its own to read it back from (`oauth revoke`,
/// `oauth remove-client`): written to the access-change feed after it is done, so that every
/// instance logs it beside the tokens it revoked. Account actions need none: their cut-off says so.
public struct AdministrativeAction: Sendable, Equatable {
    /// What was done.
    public enum Kind: String, Sendable, CaseIterable {
        case grantRevoked = "grant revoked"
        case clientRemoved = "client removed"

        /// Its kind in the feed.
        var feedKind: String {
            switch self {
            case .grantRevoked: "admin_grant_revoked"
            case .clientRemoved: "admin_client_removed"
            }
        }
    }

    public var kind: Kind
    public var clientID: String
    /// The person whose grant it was (a grant revoked).
    public var userID: String?
    public var tenantID: String?
    /// The MCP server's canonical URL (a grant revoked).
    public var resource: String?

    public init(_ kind: Kind, clientID: String, userID: String? = nil, tenantID: String? = nil, resource: String? = nil) {
        self.kind = kind
        self.clientID = clientID
        self.userID = userID
        self.tenantID = tenantID
        self.resource = resource
    }

    /// The feed row's subject: the fields as one JSON object (the row has one text column for them).
    var subject: String {
        var object: JSONObject = ["client_id": .string(clientID)]
        if let userID { object["user_id"] = .string(userID) }
        if let resource { object["resource"] = .string(resource) }
        return JSONWriter.string(.object(object))
    }

    /// The action a feed row holds; `nil` for a kind or a subject this version cannot read.
    init?(kind: String, subject: String, tenantID: String?) {
        guard let kind = Kind.allCases.first(where: { $0.feedKind == kind }),
            let object = try? StrictJSONReader().parseObject(Array(subject.utf8)), let clientID = object["client_id"]?.stringValue
        else { return nil }
        self.init(kind, clientID: clientID, userID: object["user_id"]?.stringValue, tenantID: tenantID, resource: object["resource"]?.stringValue)
    }
}
