import Foundation

/// The Notification Hubs route's unit of delivery: one tag send per platform the learner has a
/// token for (`user:{id}` reaches every installation of that platform), where the direct route pushes
/// once per token. It takes a device's place in the delivery's batches and records, so the hub's
/// sends share the permits, the outcomes table and the retry rules; the hub answers for the send,
/// never for a device, and prunes dead handles itself.
struct HubTagSend: PushSender {
    let hub: NotificationHubsClient
    let userID: UUID

    /// The unit standing for `provider`'s platform: its "token" is a name, not a credential, and only
    /// its key (`PushOutcomeStore.tokenKey`) is stored.
    static func unit(_ provider: PushTokenRegistration.Provider) -> PushTarget {
        PushTarget(token: "notification-hubs:\(NotificationHubsClient.Platform(provider).format)", provider: provider)
    }

    /// The units of the platforms among `targets`, apple before fcmv1.
    static func units(for targets: [PushTarget]) -> [PushTarget] {
        Set(targets.map(\.provider)).sorted { $0.rawValue < $1.rawValue }.map(unit)
    }

    func send(_ message: PushMessage, to target: PushTarget) async -> PushOutcome {
        await hub.sendRecall(message, toUser: userID, platform: NotificationHubsClient.Platform(target.provider))
    }
}
