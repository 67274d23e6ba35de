import BFFPlatform
import Foundation

/// A display notification for one device: what every push service is given.
struct PushMessage: Sendable, Equatable {
    let title: String
    let body: String
    /// `BFF_DEEP_LINK_BASE` + `chats/{chat_id}?recall={recall_id}`: a top-level APNs key, FCM `data`.
    let deepLink: String
    /// One per recall: a retried push replaces the shown one instead of adding a second.
    let collapseID: String
    let recallID: UUID
    let chatID: UUID
    /// After this the push is not worth showing (the recall is listed in the app anyway).
    let expiresAt: Date
}

/// What a push service made of one push, each answer mapped to one of these.
enum PushOutcome: Sendable, Equatable {
    /// Accepted by the service (not necessarily shown: the device may be off).
    case sent
    /// The token will never work again (app uninstalled, token rotated): delete it, never retry.
    case tokenDead(String)
    /// Try again later, not before `after` when the service said so.
    case retry(String, after: Duration?)
    /// Our credentials or setup are refused: no retry helps until an operator fixes them.
    case configurationError(String)
    /// The service refuses this push's content: no retry helps.
    case payloadError(String)
}

/// A registered device: its token and the service that issued it.
struct PushTarget: Sendable, Hashable {
    let token: String
    let provider: PushTokenRegistration.Provider
}

/// One push service.
protocol PushSender: Sendable {
    /// Sends `message` to `target`. Never throws: a timeout, a dropped connection or garbage is an outcome.
    func send(_ message: PushMessage, to target: PushTarget) async -> PushOutcome
}

/// The configured senders (`BFF_PUSH_ROUTE`): APNs and FCM directly, or Notification Hubs for both.
struct PushSenders: Sendable {
    var apns: (any PushSender)?
    var fcm: (any PushSender)?
    var notificationHubs: (any PushSender)?
    /// The hub's installations and tag sends; set exactly when `notificationHubs` is.
    var hubClient: NotificationHubsClient?

    /// Nil when nothing can deliver to this provider: its deliveries wait.
    func sender(for provider: PushTokenRegistration.Provider) -> (any PushSender)? {
        if let notificationHubs { return notificationHubs }
        return provider == .apns ? apns : fcm
    }

    var isEmpty: Bool { apns == nil && fcm == nil && notificationHubs == nil }
}
