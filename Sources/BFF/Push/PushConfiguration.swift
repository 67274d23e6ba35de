import BFFPlatform
import Crypto
import Foundation

/// The push services (`BFF_PUSH_ROUTE`, `BFF_APNS_*`, `BFF_FCM_*`, `BFF_NH_*`;
/// docs/configuration.md). Each is
/// on when its variables are set; none set is allowed (recalls still work, pushes wait).
public struct PushConfiguration: Sendable {
    struct APNs: Sendable {
        let keyFile: String
        let keyID: String
        let teamID: String
        let topic: String
        let baseURL: String
    }

    var apns: APNs?
    var fcmCredentialsFile: String?
    var fcmBaseURL: String
    /// `BFF_PUSH_ROUTE=notification-hubs`: every push through this hub instead.
    var notificationHubs: (connection: NotificationHubsSender.Connection, hub: String)?

    init(_ reader: EnvironmentReader) throws {
        let apnsNames = ["BFF_APNS_KEY_FILE", "BFF_APNS_KEY_ID", "BFF_APNS_TEAM_ID", "BFF_APNS_TOPIC"]
        let apnsValues = apnsNames.map(reader.optional)
        if apnsValues.contains(where: { $0 != nil }) {
            if let missing = zip(apnsNames, apnsValues).first(where: { $0.1 == nil }) {
                throw ConfigurationError(missing.0, "must be set with the other BFF_APNS_* variables")
            }
            let (keyFile, keyID, teamID, topic) = (apnsValues[0]!, apnsValues[1]!, apnsValues[2]!, apnsValues[3]!)
            for (name, value) in [("BFF_APNS_KEY_ID", keyID), ("BFF_APNS_TEAM_ID", teamID)]
            where value.utf8.count != 10 || !value.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) }) {
                throw ConfigurationError(name, "must be Apple's 10-character identifier (A-Z, 0-9)")
            }
            apns = APNs(
                keyFile: keyFile, keyID: keyID, teamID: teamID, topic: topic,
                baseURL: try Self.baseURL(reader, "BFF_APNS_BASE_URL", default: "https://api.push.apple.com"))
        }
        fcmCredentialsFile = reader.optional("BFF_FCM_CREDENTIALS_FILE")
        fcmBaseURL = try Self.baseURL(reader, "BFF_FCM_BASE_URL", default: "https://fcm.googleapis.com")
        switch try PushRoute(reader) {
        case .direct:
            // A hub's settings without its route would leave pushes off while the operator thinks
            // the hub delivers them.
            for name in ["BFF_NH_CONNECTION_STRING", "BFF_NH_HUB"] where reader.optional(name) != nil {
                throw ConfigurationError("BFF_PUSH_ROUTE", "must be notification-hubs when \(name) is set")
            }
        case .notificationHubs:
            guard let text = reader.optional("BFF_NH_CONNECTION_STRING") else {
                throw ConfigurationError("BFF_NH_CONNECTION_STRING", "is required with BFF_PUSH_ROUTE=notification-hubs")
            }
            guard let connection = NotificationHubsSender.Connection(connectionString: text) else {
                throw ConfigurationError(
                    "BFF_NH_CONNECTION_STRING", "must be Endpoint=sb://NAMESPACE.servicebus.windows.net/;SharedAccessKeyName=…;SharedAccessKey=…")
            }
            guard let hub = reader.optional("BFF_NH_HUB"),
                hub.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || "._-".utf8.contains($0) }),
                hub.utf8.count <= 260
            else { throw ConfigurationError("BFF_NH_HUB", "must name the hub (letters, digits, . _ -)") }
            notificationHubs = (connection, hub)
        }
    }

    /// An https URL without a trailing slash: push payloads name learners' chats.
    private static func baseURL(_ reader: EnvironmentReader, _ name: String, default fallback: String) throws -> String {
        let value = reader.string(name, default: fallback)
        guard let url = URL(string: value), url.scheme == "https", url.host != nil, url.query == nil else {
            throw ConfigurationError(name, "must be an https URL, got \"\(value)\"")
        }
        return value.hasSuffix("/") ? String(value.dropLast()) : value
    }
}

extension PushSenders {
    /// The senders `configuration` turns on, their keys read once here: a key that cannot be read
    /// stops start-up, naming its variable.
    init(configuration: PushConfiguration, outbound: OutboundHTTPConfiguration) throws {
        self.init()
        guard configuration.apns != nil || configuration.fcmCredentialsFile != nil || configuration.notificationHubs != nil else { return }
        let http = try OutboundHTTP.client(extraCAFile: outbound.extraCAFile)
        if let hubs = configuration.notificationHubs {
            // The hub holds the APNs and FCM credentials; this process needs none of its own.
            self.notificationHubs = NotificationHubsSender(connection: hubs.connection, hub: hubs.hub, http: http)
            self.hubClient = NotificationHubsClient(connection: hubs.connection, hub: hubs.hub, http: http)
            return
        }
        if let apns = configuration.apns {
            let pem: String
            do {
                pem = try String(contentsOfFile: apns.keyFile, encoding: .utf8)
            } catch {
                throw ConfigurationError("BFF_APNS_KEY_FILE", "\(apns.keyFile) cannot be read")
            }
            guard let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) else {
                throw ConfigurationError("BFF_APNS_KEY_FILE", "\(apns.keyFile) is not an APNs .p8 key (a PEM P-256 private key)")
            }
            self.apns = APNsSender(
                configuration: .init(baseURL: apns.baseURL, topic: apns.topic, keyID: apns.keyID, teamID: apns.teamID, key: key), http: http)
        }
        if let file = configuration.fcmCredentialsFile {
            self.fcm = try FCMSender(credentialsFile: file, baseURL: configuration.fcmBaseURL, http: http)
        }
    }
}
