import DataPlane
import EdgeHTTP
import Synchronization

/// The identity fields every allowed check removes from the original request, in each spelling,
/// made once for a route table (they change only with its routes' `identity_headers`), not per check.
package struct ExtAuthzRemovalList: Sendable {
    /// The route table's generation this list was made for.
    let generation: Int
    /// Every identity field the gateway knows, folded (`HeaderScreen.folded`): a client's field whose
    /// name folds to one of these is removed in whatever spelling it came.
    let identity: Set<String>
    /// Each of `identity` in its `-`, `_` and `.` spellings, sorted; those Envoy sets itself only in
    /// their `_` and `.` spellings.
    let names: [String]
    /// `names` as a set, for the fields a check adds to them.
    let nameSet: Set<String>

    /// Identity fields oauth2-proxy, Pomerium and common apps trust, beyond the families the gateway
    /// answers with (`x-auth-request-*`, `x-portcullis-*`) and `HeaderScreen.identityHeaders`.
    static let trustedByApps: Set<String> = [
        "x-forwarded-user", "x-forwarded-email", "x-forwarded-groups", "x-forwarded-preferred-username", "x-forwarded-access-token",
        "x-user", "x-user-id", "x-tenant", "x-tenant-id", "x-remote-user", "remote-user", "x-authenticated-user", "x-authenticated-userid",
        "x-auth-user", "x-original-user", "x-subject", "x-scope", "x-session-id", "x-pomerium-jwt-assertion", "x-pomerium-claim-email",
    ]
    /// Fields Envoy itself sets on the request it forwards: left to it (their `_` and `.` spellings are still removed).
    static let setByEnvoy: Set<String> = ["x-forwarded-for", "x-forwarded-proto", "x-request-id"]

    init(table: RouteTable) {
        // The fields forward-auth's answer holds (the assertion, `X-Auth-Request-*`), from the answer itself.
        let answered = ForwardAuthAnswer.fields(assertion: "", caller: nil, route: nil, appCookie: "").map { HeaderScreen.folded($0.name.lowercased()) }
            .filter { $0 != "cache-control" && $0 != "x-portcullis-app-cookie" }
        let identity = HeaderScreen.identityHeaders.union(Self.trustedByApps).union(table.identityFieldNames).union(answered)
        var names: [String] = []
        names.reserveCapacity(identity.count * 3)
        for name in identity.sorted() {
            if !Self.setByEnvoy.contains(name) { names.append(name) }
            names.append(name.replacingOccurrences(of: "-", with: "_"))
            names.append(name.replacingOccurrences(of: "-", with: "."))
        }
        self.generation = table.generation
        self.identity = identity
        self.names = names
        self.nameSet = Set(names)
    }
}

/// The list in force for each route table, made when a check first meets a new table.
package final class ExtAuthzRemovalLists: Sendable {
    private let current = Mutex<ExtAuthzRemovalList?>(nil)

    package init() {}

    /// The list for `table`, made now if the one kept is another table's.
    func list(for table: RouteTable) -> ExtAuthzRemovalList {
        current.withLock { kept in
            if let kept, kept.generation == table.generation { return kept }
            let made = ExtAuthzRemovalList(table: table)
            kept = made
            return made
        }
    }
}
