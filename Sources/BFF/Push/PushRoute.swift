import BFFPlatform

/// `BFF_PUSH_ROUTE`: to APNs and FCM directly, or through Azure Notification Hubs. Every command
/// reads it, not only those that send: a change of a device's push token is mirrored to the hub's
/// installations in the change's own transaction, and `bff auth revoke` changes tokens too.
enum PushRoute: String, Sendable {
    case direct
    case notificationHubs = "notification-hubs"

    init(_ reader: EnvironmentReader) throws {
        let value = reader.string("BFF_PUSH_ROUTE", default: PushRoute.direct.rawValue)
        guard let route = PushRoute(rawValue: value) else {
            throw ConfigurationError("BFF_PUSH_ROUTE", "must be direct or notification-hubs, got \"\(value)\"")
        }
        self = route
    }
}
