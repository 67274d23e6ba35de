import BFFJobs
import BFFPlatform
import Foundation
import Logging
import Metrics

/// Runs `push.installation` (`InstallationMirror`): makes the hub's installation of one device what
/// `push_tokens` holds for it now, a PUT when the device has a token and a DELETE when it has none.
/// The hub's faults: 403 (its quota), 429, 5xx and timeouts retry, after `Retry-After` when given;
/// 401 and other refusals of our key or hub dead-letter loudly, as does an installation the hub
/// calls malformed.
struct InstallationMirrorJob: Sendable {
    let tokens: PushTokenStore
    let hub: NotificationHubsClient
    let logger: Logger

    /// Few at once: the hub limits the rate of installation operations per namespace, and a burst
    /// (a mass revocation) is better spread out than answered 403.
    var handler: JobHandler {
        JobHandler(kind: InstallationMirror.kind, concurrency: 4) { job in try await run(job) }
    }

    /// How often one run tells the hub again when the device changed while it was being told.
    static let rounds = 3

    func run(_ job: Job) async throws {
        let args = try job.decode(InstallationMirror.Args.self)
        var logger = logger
        logger[metadataKey: "job_id"] = .stringConvertible(job.id)
        for _ in 0..<Self.rounds {
            let wanted = try await tokens.installation(deviceID: args.deviceID)
            let outcome: NotificationHubsClient.InstallationOutcome
            if let wanted {
                outcome = await hub.put(wanted)
            } else {
                outcome = await hub.deleteInstallation(args.deviceID)
            }
            try fail(on: outcome, logger: logger)
            // Two jobs of one device may run at once, and the older one's request may reach the hub
            // last: each reads the device again after its answer and tells the hub once more when it
            // changed, so the last to finish leaves the truth.
            if try await tokens.installation(deviceID: args.deviceID) == wanted { return }
        }
        throw JobFailure.retry("the device's push token kept changing while the hub was told", after: .seconds(5))
    }

    private func fail(on outcome: NotificationHubsClient.InstallationOutcome, logger: Logger) throws {
        switch outcome {
        case .applied:
            Counter(label: "bff_push_installations_total", dimensions: [("outcome", "applied")]).increment()
        case .retry(let reason, let after):
            Counter(label: "bff_push_installations_total", dimensions: [("outcome", "retry")]).increment()
            throw JobFailure.retry(reason, after: after)
        case .configurationError(let reason):
            Counter(label: "bff_push_installations_total", dimensions: [("outcome", "configuration_error")]).increment()
            logger.error(
                "Notification Hubs refused our key or hub; fix BFF_NH_CONNECTION_STRING or BFF_NH_HUB, then `bff jobs retry`",
                metadata: ["reason": .string(reason)])
            throw JobFailure.deadLetter("configuration: \(reason)")
        case .refused(let reason):
            Counter(label: "bff_push_installations_total", dimensions: [("outcome", "refused")]).increment()
            logger.error("Notification Hubs refused an installation", metadata: ["reason": .string(reason)])
            throw JobFailure.deadLetter("installation refused: \(reason)")
        }
    }
}
