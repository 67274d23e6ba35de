import BFFPlatform
import Foundation

/// A display notification for one device: what every push service is given.
struct PushMessage: Sendable, Equatable {
    /// What the push is about: the data's `type`, by which the app routes it, and what goes beside it.
    enum Kind: Sendable, Equatable {
        /// A recall came due: its id and its chat's go with it.
        case recall(recallID: UUID, chatID: UUID)
        /// The learner's streak breaks tonight unless today counts: nothing but the type and the link.
        case streak

        /// The data's `type`.
        var type: String {
            switch self {
            case .recall: "recall"
            case .streak: "streak"
            }
        }
    }

    let title: String
    let body: String
    /// What the app opens: for a recall `BFF_DEEP_LINK_BASE` + `chats/{chat_id}?recall={recall_id}`; a top-level APNs key, FCM `data`.
    let deepLink: String
    /// One per recall, one per streak push's day: a retried push replaces the shown one instead of adding a second.
    let collapseID: String
    let kind: Kind
    /// After this the push is not worth showing (the recall is listed in the app anyway; the streak's day is over).
    let expiresAt: Date

    var recallID: UUID? {
        if case .recall(let recallID, _) = kind { return recallID }
        return nil
    }

    var chatID: UUID? {
        if case .recall(_, let chatID) = kind { return chatID }
        return nil
    }
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
