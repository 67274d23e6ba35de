import Foundation

/// One push's fan-out to a learner's devices, shared by a recall's delivery and the streak push:
/// which sender serves each device, and the batches that each hold their permits until their
/// answers are recorded.
extension PushSenders {
    /// Each of `targets` not yet accepted (`notAccepted`) with the sender that serves it, and the
    /// providers no configured service serves. The hub's route: one tag send per platform, each
    /// recorded and retried as a device is.
    func assign(
        _ targets: [PushTarget], userID: UUID, notAccepted: ([PushTarget]) -> [PushTarget]
    ) -> (sendable: [(PushTarget, any PushSender)], unserved: Set<String>) {
        if let hubClient {
            let sender = HubTagSend(hub: hubClient, userID: userID)
            return (notAccepted(HubTagSend.units(for: targets)).map { ($0, sender) }, [])
        }
        var sendable: [(PushTarget, any PushSender)] = []
        var unserved: Set<String> = []
        for target in notAccepted(targets) {
            if let sender = sender(for: target.provider) {
                sendable.append((target, sender))
            } else {
                unserved.insert(target.provider.rawValue)
            }
        }
        return (sendable, unserved)
    }
}

extension PushPermits {
    /// Pushes to each of `sendable` through `push`, a batch of at most `total` at once. A batch holds
    /// its permits until `record` has stored its answers: a worker killed now re-sends at most the
    /// permits' count of pushes, each with its collapse id. Every answer, in batch order.
    func fanOut(
        to sendable: [(PushTarget, any PushSender)],
        push: @escaping @Sendable (PushTarget, any PushSender) async -> PushOutcomeRecord,
        record: ([PushOutcomeRecord]) async throws -> Void
    ) async throws -> [PushOutcomeRecord] {
        var answered: [PushOutcomeRecord] = []
        var remaining = sendable[...]
        while !remaining.isEmpty {
            let batch = Array(remaining.prefix(total))
            remaining = remaining.dropFirst(batch.count)
            answered += try await withPermits(batch.count) {
                let answers = await withTaskGroup(of: PushOutcomeRecord.self) { group in
                    for (target, sender) in batch { group.addTask { await push(target, sender) } }
                    var answers: [PushOutcomeRecord] = []
                    for await answer in group { answers.append(answer) }
                    return answers
                }
                try await record(answers)
                return answers
            }
        }
        return answered
    }
}
