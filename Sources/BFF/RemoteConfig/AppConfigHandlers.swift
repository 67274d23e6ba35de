import BFFAPI
import BFFPlatform
import Crypto
import Foundation

/// `GET /api/v1/app-config`: the remote configuration as one platform, version and region see it.
extension APIService {
    func getAppConfig(_ input: Operations.GetAppConfig.Input) async throws -> Operations.GetAppConfig.Output {
        let platform: ClientIdentity.Platform = input.query.platform == .ios ? .ios : .android
        var version: AppVersion?
        if let text = input.query.appVersion {
            guard let parsed = AppVersion(text) else { throw APIError.validation("app_version", .appVersionShape) }
            version = parsed
        }
        if let region = input.query.region, !RemoteConfig.isRegion(region) {
            throw APIError.validation("region", .regionShape)
        }
        let config = remoteConfig.current()
        let versions = config.platforms[platform]
        let maintenance = config.maintenance
        let now = Date()
        let body = Components.Schemas.AppConfig(
            minSupportedVersion: versions?.minSupported?.description, latestVersion: versions?.latest?.description,
            updateRequired: version.flatMap { current in versions?.minSupported.map { current < $0 } } ?? false,
            maintenance: .init(active: maintenance.isOn(at: now), message: maintenance.isOn(at: now) ? maintenance.message : nil, until: maintenance.isOn(at: now) ? maintenance.until : nil),
            features: .init(additionalProperties: config.features.mapValues { $0.value(platform: platform, version: version, region: input.query.region) }))
        let tag = try Self.entityTag(of: body, platform: platform, version: version, region: input.query.region)
        if let asked = input.headers.ifNoneMatch, Self.matches(asked, tag) {
            return .notModified(.init(headers: .init(eTag: tag, cacheControl: "max-age=60")))
        }
        return .ok(.init(headers: .init(eTag: tag, cacheControl: "max-age=60"), body: .json(body)))
    }

    /// A strong tag of what this client would be answered: the body and what it was asked for.
    static func entityTag(of body: Components.Schemas.AppConfig, platform: ClientIdentity.Platform, version: AppVersion?, region: String?) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var hashed = try encoder.encode(body)
        hashed.append(contentsOf: Array("\n\(platform.rawValue) \(version?.description ?? "-") \(region ?? "-")".utf8))
        return "\"" + SHA256.hash(data: hashed).prefix(12).map { String(format: "%02x", $0) }.joined() + "\""
    }

    /// `If-None-Match`: `*`, or a list of tags, weak ones compared weakly (RFC 9110 §13.1.2); anything else matches nothing.
    static func matches(_ header: String, _ tag: String) -> Bool {
        if header.trimmingCharacters(in: .whitespaces) == "*" { return true }
        return header.split(separator: ",").contains { candidate in
            var candidate = candidate.trimmingCharacters(in: .whitespaces)
            if candidate.hasPrefix("W/") { candidate.removeFirst(2) }
            return candidate == tag
        }
    }
}
