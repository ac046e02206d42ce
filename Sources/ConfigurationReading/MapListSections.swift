import Configuration
import Foundation
import Yams

/// One map of a list of maps in the configuration file (an entry of `trust.issuers`).
///
/// The configuration library reads scalars and lists of scalars only ("Unexpected
/// non-scalar value in array"), so these sections are read here, from the file,
/// and kept out of what the library sees. Every value is a string or a list of
/// strings as the YAML wrote it; the reads convert and name the entry and key
/// when a value cannot be used.
public struct ConfigurationMap: Sendable, Equatable {
    public enum Value: Sendable, Equatable {
        case scalar(String)
        case list([String])
        /// A map inside the entry (`login:` of a trusted issuer).
        case map(ConfigurationMap)
        /// A list of maps inside the entry (`any_of:` of a route's `require`).
        case maps([ConfigurationMap])
        /// Anything else (a list holding maps or lists): never meaningful in these entries.
        case nested
    }

    /// The entry's key for messages: `trust.issuers[0]`.
    public let key: String
    public let values: [String: Value]
    /// For a list that takes strings beside maps (`gateway.routes`): the entry when it is a string.
    public let scalar: String?

    public init(key: String, values: [String: Value], scalar: String? = nil) {
        self.key = key
        self.values = values
        self.scalar = scalar
    }

    /// The keys this entry sets.
    public var names: Set<String> { Set(values.keys) }

    private func error(_ name: String, _ problem: String) -> ConfigurationError {
        ConfigurationError(fileKey: "\(key).\(name)", problem)
    }

    public func string(_ name: String) throws(ConfigurationError) -> String? {
        switch values[name] {
        case nil: return nil
        case .scalar(let text)?:
            guard !text.isEmpty else { throw error(name, "must not be empty") }
            return text
        default: throw error(name, "must be a string")
        }
    }

    /// A list of strings; a single string counts as a list of one.
    public func strings(_ name: String) throws(ConfigurationError) -> [String]? {
        switch values[name] {
        case nil: return nil
        case .scalar(let text)?: return [text]
        case .list(let list)?: return list
        case .nested?, .map?, .maps?: throw error(name, "must be a list of strings")
        }
    }

    /// A map inside this entry, its keys named `KEY.name.inner` in messages.
    public func map(_ name: String) throws(ConfigurationError) -> ConfigurationMap? {
        switch values[name] {
        case nil: return nil
        case .map(let map)?: return map
        default: throw error(name, "must be a map of settings")
        }
    }

    /// A list of maps inside this entry, each named `KEY.name[N]` in messages.
    public func maps(_ name: String) throws(ConfigurationError) -> [ConfigurationMap]? {
        switch values[name] {
        case nil: return nil
        case .maps(let maps)?: return maps
        default: throw error(name, "must be a list of maps")
        }
    }

    public func int(_ name: String, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
        guard let text = try string(name) else { return nil }
        guard let value = Int(text) else { throw error(name, "must be a whole number") }
        guard range.contains(value) else { throw error(name, "must be from \(range.lowerBound) to \(range.upperBound), not \(value)") }
        return value
    }

    /// `true` or `false` (YAML's spellings of them); anything else names the key.
    public func bool(_ name: String) throws(ConfigurationError) -> Bool? {
        guard let text = try string(name) else { return nil }
        switch text.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: throw error(name, "must be true or false, not \"\(text)\"")
        }
    }

    /// An error about key `name` of this entry.
    public func problem(_ name: String, _ problem: String) -> ConfigurationError {
        error(name, problem)
    }
}

/// The lists of maps the configuration holds, read from the file's text.
enum MapListSections {
    /// `section.list` keys read as lists of maps (kept from the library); an empty section is the
    /// file's top level (`connections`).
    static let keys: [(section: String, list: String)] = [
        ("trust", "issuers"), ("gateway", "routes"), ("authorization_server", "clients"), ("", "connections"),
    ]

    static func dotted(_ section: String, _ list: String) -> String { section.isEmpty ? list : "\(section).\(list)" }
    /// Lists whose entries may also be strings (the short form `PREFIX=URL`).
    static let takingStrings: Set<String> = ["gateway.routes"]

    /// Every dotted key `text` sets, down to its scalars and lists of scalars; a list of maps
    /// (`gateway.routes`) is one key (its entries check their own keys). A key with no value
    /// (`gateway:` and nothing under it) sets nothing.
    static func keyPaths(_ text: String) throws -> Set<String> {
        guard let root = try Yams.compose(yaml: text)?.mapping else { return [] }
        let mapLists = Set(keys.map { dotted($0.section, $0.list) })
        var paths: Set<String> = []
        func walk(_ mapping: Node.Mapping, _ prefix: String) {
            for (name, value) in mapping {
                guard let name = name.string else { continue }
                let path = prefix.isEmpty ? name : prefix + "." + name
                if let inner = value.mapping, !mapLists.contains(path) {
                    walk(inner, path)
                } else if let scalar = value.scalar, scalar.style == .plain, ["", "~", "null", "Null", "NULL"].contains(scalar.string) {
                    continue  // YAML's null: the key is written, and sets nothing
                } else {
                    paths.insert(path)
                }
            }
        }
        walk(root, "")
        return paths
    }

    /// The lists of maps in `text`, by their dotted key.
    static func read(_ text: String) throws -> [String: [ConfigurationMap]] {
        guard let root = try Yams.compose(yaml: text)?.mapping else { return [:] }
        var result: [String: [ConfigurationMap]] = [:]
        for (section, list) in keys {
            guard let node = section.isEmpty ? root[list] : root[section]?.mapping?[list] else { continue }
            let key = dotted(section, list)
            guard let sequence = node.sequence else {
                if node.scalar?.string.isEmpty == true || node.scalar?.string == "null" { continue }
                throw ConfigurationError(fileKey: key, "must be a list of maps, one per entry (see config/portcullis.yaml)")
            }
            result[key] = try sequence.enumerated().map { index, entry in
                if takingStrings.contains(key), let scalar = entry.scalar {
                    return ConfigurationMap(key: "\(key)[\(index)]", values: [:], scalar: scalar.string)
                }
                guard let mapping = entry.mapping else {
                    throw ConfigurationError(fileKey: "\(key)[\(index)]", "must be a map of settings (issuer: ..., audiences: [...])")
                }
                return map(mapping, key: "\(key)[\(index)]")
            }
        }
        return result
    }

    /// One map's values, a map inside it read the same way (as `KEY.name`).
    static func map(_ mapping: Node.Mapping, key: String) -> ConfigurationMap {
        var values: [String: ConfigurationMap.Value] = [:]
        for (name, value) in mapping {
            guard let name = name.string else { continue }
            if let scalar = value.scalar {
                values[name] = .scalar(scalar.string)
            } else if let items = value.sequence {
                let strings = items.compactMap(\.scalar?.string)
                let mappings = items.compactMap(\.mapping)
                if strings.count == items.count {
                    values[name] = .list(strings)
                } else if mappings.count == items.count {
                    values[name] = .maps(mappings.enumerated().map { map($1, key: "\(key).\(name)[\($0)]") })
                } else {
                    values[name] = .nested
                }
            } else if let inner = value.mapping {
                values[name] = .map(map(inner, key: "\(key).\(name)"))
            } else {
                values[name] = .nested
            }
        }
        return ConfigurationMap(key: key, values: values)
    }

    /// `text` without the lists of maps (the rest of their sections stays), as YAML.
    static func withoutMapLists(_ text: String) throws -> String {
        guard let root = try Yams.compose(yaml: text), var mapping = root.mapping else { return text }
        var changed = false
        for (section, list) in keys {
            if section.isEmpty {
                guard mapping[list] != nil else { continue }
                mapping[list] = nil
                changed = true
                continue
            }
            guard var inner = mapping[section]?.mapping, inner[list] != nil else { continue }
            inner[list] = nil
            mapping[section] = inner.isEmpty ? nil : Node.mapping(inner)
            changed = true
        }
        guard changed else { return text }
        return mapping.isEmpty ? "{}\n" : try Yams.serialize(node: .mapping(mapping))
    }
}

/// The configuration library's YAML snapshot of the file without its lists of maps.
struct MapListFreeYAMLSnapshot: FileConfigSnapshot {
    typealias ParsingOptions = YAMLSnapshot.ParsingOptions
    let inner: YAMLSnapshot

    init(data: RawSpan, providerName: String, parsingOptions: ParsingOptions) throws {
        let text = data.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        let filtered = Array(try MapListSections.withoutMapLists(text).utf8)
        inner = try YAMLSnapshot(data: filtered.span.bytes, providerName: providerName, parsingOptions: parsingOptions)
    }

    var providerName: String { inner.providerName }
    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult { try inner.value(forKey: key, type: type) }
    var description: String { inner.description }
    var debugDescription: String { inner.debugDescription }
}
