import BFFPlatform
import Foundation

/// The remote app configuration (App Configuration's role, docs/requirements.md §12): the versions each
/// platform supports, maintenance mode and feature flags, from `BFF_APP_CONFIG_FILE`:
///
///     {"platforms": {"ios": {"min_supported_version": "1.2.0", "latest_version": "1.4.0"},
///                    "android": {"min_supported_version": "1.1.0", "latest_version": "1.4.0"}},
///      "maintenance": {"active": false, "message": "…", "until": null},
///      "features": {"instant_question": true,
///                   "external_purchase_link": {"default": false, "regions": {"US": true},
///                                              "platforms": {"android": false}, "min_version": "1.3.0"}}}
///
/// Every key is optional; an unknown key anywhere is refused, so a typo is an error, not a flag
/// silently off. Without a file: no minimum, no maintenance, no features.
struct RemoteConfig: Sendable, Equatable {
    struct PlatformVersions: Sendable, Equatable {
        var minSupported: AppVersion?
        var latest: AppVersion?

        static func == (lhs: PlatformVersions, rhs: PlatformVersions) -> Bool {
            lhs.minSupported?.parts == rhs.minSupported?.parts && lhs.latest?.parts == rhs.latest?.parts
        }
    }

    struct Maintenance: Sendable, Equatable {
        var active = false
        var message: String?
        var until: Date?

        /// Active, and its announced end (if any) not yet passed.
        func isOn(at now: Date) -> Bool { active && (until.map { $0 > now } ?? true) }
    }

    /// A flag: one value, or a default refined by platform, then store region, and off below a version.
    struct Feature: Sendable, Equatable {
        var value: Bool
        var platforms: [ClientIdentity.Platform: Bool] = [:]
        var regions: [String: Bool] = [:]
        var minVersion: AppVersion?

        static func == (lhs: Feature, rhs: Feature) -> Bool {
            lhs.value == rhs.value && lhs.platforms == rhs.platforms && lhs.regions == rhs.regions && lhs.minVersion?.parts == rhs.minVersion?.parts
        }

        func value(platform: ClientIdentity.Platform, version: AppVersion?, region: String?) -> Bool {
            var value = platforms[platform] ?? self.value
            if let region, let regional = regions[region] { value = regional }
            if let minVersion {
                // An unknown version is below every minimum.
                let recent = version.map { $0 >= minVersion } ?? false
                if !recent { value = false }
            }
            return value
        }
    }

    var platforms: [ClientIdentity.Platform: PlatformVersions] = [:]
    var maintenance = Maintenance()
    var features: [String: Feature] = [:]

    static let none = RemoteConfig()

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// Parses the file's JSON; throws `Invalid` naming what is wrong and where.
    init(json data: Data) throws {
        guard case .object(let root) = (try? JSONDecoder().decode(JSONValue.self, from: data)) else { throw Invalid(description: "not a JSON object") }
        try Self.known(root, ["platforms", "maintenance", "features"], at: "the file")
        for (name, value) in try Self.object(root["platforms"], at: "platforms") ?? [:] {
            guard let platform = ClientIdentity.Platform(rawValue: name) else { throw Invalid(description: "platforms.\(name): ios or android") }
            guard let entry = try Self.object(value, at: "platforms.\(name)") else { continue }
            try Self.known(entry, ["min_supported_version", "latest_version"], at: "platforms.\(name)")
            platforms[platform] = PlatformVersions(
                minSupported: try Self.version(entry["min_supported_version"], at: "platforms.\(name).min_supported_version"),
                latest: try Self.version(entry["latest_version"], at: "platforms.\(name).latest_version"))
        }
        if let entry = try Self.object(root["maintenance"], at: "maintenance") {
            try Self.known(entry, ["active", "message", "until"], at: "maintenance")
            maintenance.active = try Self.bool(entry["active"], at: "maintenance.active") ?? false
            maintenance.message = try Self.string(entry["message"], at: "maintenance.message")
            if let until = try Self.string(entry["until"], at: "maintenance.until") {
                guard let date = try? RFC3339Dates().decode(until) else { throw Invalid(description: "maintenance.until: an RFC 3339 date-time or null") }
                maintenance.until = date
            }
        }
        for (name, value) in try Self.object(root["features"], at: "features") ?? [:] {
            guard (1...64).contains(name.utf8.count), name.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F }) else {
                throw Invalid(description: "features.\(name): names are lower_snake_case")
            }
            if case .bool(let flag) = value {
                features[name] = Feature(value: flag)
                continue
            }
            guard let entry = try Self.object(value, at: "features.\(name)") else { throw Invalid(description: "features.\(name): true, false or an object") }
            try Self.known(entry, ["default", "platforms", "regions", "min_version"], at: "features.\(name)")
            var feature = Feature(value: try Self.bool(entry["default"], at: "features.\(name).default") ?? false)
            for (platformName, on) in try Self.object(entry["platforms"], at: "features.\(name).platforms") ?? [:] {
                guard let platform = ClientIdentity.Platform(rawValue: platformName), let on = try Self.bool(on, at: "features.\(name).platforms.\(platformName)")
                else { throw Invalid(description: "features.\(name).platforms.\(platformName): ios or android, true or false") }
                feature.platforms[platform] = on
            }
            for (region, on) in try Self.object(entry["regions"], at: "features.\(name).regions") ?? [:] {
                guard Self.isRegion(region), let on = try Self.bool(on, at: "features.\(name).regions.\(region)") else {
                    throw Invalid(description: "features.\(name).regions.\(region): a two-letter region code (JP, US), true or false")
                }
                feature.regions[region] = on
            }
            feature.minVersion = try Self.version(entry["min_version"], at: "features.\(name).min_version")
            features[name] = feature
        }
    }

    init() {}

    static func isRegion(_ text: String) -> Bool { text.utf8.count == 2 && text.utf8.allSatisfy { (0x41...0x5A).contains($0) } }

    private static func known(_ object: [String: JSONValue], _ keys: Set<String>, at place: String) throws {
        if let unknown = object.keys.first(where: { !keys.contains($0) }) {
            throw Invalid(description: "\(place): unknown key \"\(unknown)\" (known: \(keys.sorted().joined(separator: ", ")))")
        }
    }

    private static func object(_ value: JSONValue?, at place: String) throws -> [String: JSONValue]? {
        switch value {
        case nil, .null?: return nil
        case .object(let object)?: return object
        default: throw Invalid(description: "\(place): an object")
        }
    }

    private static func bool(_ value: JSONValue?, at place: String) throws -> Bool? {
        switch value {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        default: throw Invalid(description: "\(place): true or false")
        }
    }

    private static func string(_ value: JSONValue?, at place: String) throws -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let text)? where text.utf8.count <= 1_000: return text
        default: throw Invalid(description: "\(place): a string of at most 1,000 bytes")
        }
    }

    private static func version(_ value: JSONValue?, at place: String) throws -> AppVersion? {
        guard let text = try string(value, at: place) else { return nil }
        guard let version = AppVersion(text) else { throw Invalid(description: "\(place): a version such as 1.4.0") }
        return version
    }
}

/// A JSON value with its kind kept (a flag is a boolean, never a number that looks like one).
private enum JSONValue: Decodable {
    case null, bool(Bool), number(Double), string(String), array([JSONValue]), object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let array = try? container.decode([JSONValue].self) {
            self = .array(array)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }
}
