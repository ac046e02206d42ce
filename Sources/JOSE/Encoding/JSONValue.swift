/// A JSON value as the strict reader produces it.
///
/// Numbers are finite doubles (the reader refuses anything that overflows);
/// objects keep their members in document order and never hold a name twice.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The string, if this value is one.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number, if this value is one.
    public var numberValue: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// The object, if this value is one.
    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The JSON type's name, for error messages ("a string", "an array", ...).
    public var typeDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

/// One member of a JSON object.
public struct JSONMember: Sendable, Equatable {
    public let name: String
    public var value: JSONValue
    /// FNV-1a of the name's UTF-8: lookups and duplicate checks compare this
    /// integer before comparing strings.
    let nameHash: UInt32
    /// The header or claim name the verifier acts on that this member's name is, if any: read
    /// once, when the member is made (the strict reader knows it while it reads the name), so
    /// the header and claim rules switch on it with no hashing or string comparison.
    let registered: RegisteredName?

    public init(_ name: String, _ value: JSONValue) {
        self.init(name, value, hash: JSONMember.hash(name))
    }

    init(_ name: String, _ value: JSONValue, hash: UInt32) {
        self.init(name, value, hash: hash, registered: RegisteredName.classify(name, hash: hash))
    }

    /// A member whose name the caller has already classified (`registered` must be
    /// `RegisteredName.classify(name)`).
    init(_ name: String, _ value: JSONValue, hash: UInt32, registered: RegisteredName?) {
        assert(registered == RegisteredName.classify(name, hash: hash), "a member's registered name is its name's")
        self.name = name
        self.value = value
        self.nameHash = hash
        self.registered = registered
    }

    public static func == (lhs: JSONMember, rhs: JSONMember) -> Bool {
        lhs.name == rhs.name && lhs.value == rhs.value
    }

    /// FNV-1a (32-bit) over UTF-8 bytes.
    @inline(__always)
    static func hash<Bytes: Sequence>(bytes: Bytes) -> UInt32 where Bytes.Element == UInt8 {
        var hash: UInt32 = 2_166_136_261
        for byte in bytes { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return hash
    }

    static func hash(_ name: String) -> UInt32 {
        var name = name
        return name.withUTF8 { hash(bytes: $0) }
    }
}

/// A JSON object whose member names are unique, in document order.
///
/// Lookup is a linear scan: JOSE headers and claim sets hold a handful of
/// members, where a scan beats hashing.
public struct JSONObject: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var members: [JSONMember]

    public init() { members = [] }

    /// Duplicate names in a literal keep the last value, as assignment does.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        members = []
        for (name, value) in elements { self[name] = value }
    }

    /// Builds an object from members already known to have unique names.
    init(uniqueMembers: [JSONMember]) { members = uniqueMembers }

    /// The value of the member `name`, if present.
    public subscript(name: String) -> JSONValue? {
        get {
            guard let index = index(of: name) else { return nil }
            return members[index].value
        }
        set {
            let hash = JSONMember.hash(name)
            if let index = index(of: name, hash: hash) {
                if let newValue { members[index].value = newValue } else { members.remove(at: index) }
            } else if let newValue {
                members.append(JSONMember(name, newValue, hash: hash))
            }
        }
    }

    /// The value of the member whose name is the registered `name`, if present: a scan of
    /// one byte a member, for the verifier's hot path.
    func value(of name: RegisteredName) -> JSONValue? {
        for member in members where member.registered == name { return member.value }
        return nil
    }

    /// The position of the member `name`, comparing hashes before strings.
    func index(of name: String, hash: UInt32? = nil) -> Int? {
        let hash = hash ?? JSONMember.hash(name)
        for index in members.indices where members[index].nameHash == hash && members[index].name == name {
            return index
        }
        return nil
    }

    public var count: Int { members.count }
    public var names: [String] { members.map(\.name) }

    /// The value at a path of member names through nested objects (`["realm_access", "roles"]`);
    /// `nil` when a name is absent or a value on the way is not an object. A dotted name is a
    /// path here, never a member's name.
    public func value(atPath path: [String]) -> JSONValue? {
        var current: JSONValue? = nil
        var object: JSONObject? = self
        for name in path {
            guard let here = object?[name] else { return nil }
            current = here
            object = here.objectValue
        }
        return current
    }

    public func makeIterator() -> IndexingIterator<[JSONMember]> { members.makeIterator() }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
    /// Duplicate names in a literal keep the last value, as assignment does.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var object = JSONObject()
        for (name, value) in elements { object[name] = value }
        self = .object(object)
    }
}
