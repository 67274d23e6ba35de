import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOConcurrencyHelpers
import PostgresNIO
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// The whole re-recall loop as a learner meets it, through the configured server and its job worker,
/// to local APNs and FCM servers reached over TLS (`BFF_OUTBOUND_CA_FILE`): evaluation → recall in
/// the window → a push with the deep link to each device → opened → re-evaluation → a longer interval.
@Suite("Re-recall loop end to end", .needsDatabase, .timeLimit(.minutes(3)))
struct RecallLoopTests {
    let url: DatabaseURL
    let tls: LocalTLS

    init() async throws {
        url = try await TestDatabases.shared.makeMigrated()
        tls = try LocalTLS.make()
    }

    @Test("push → deep link → opened → re-evaluation: APNs and FCM each get the recall once, the next interval is longer")
    func loop() async throws {
        let apns = LocalAPNs()
        let fcm = LocalFCM()
        let delivery = RecallDeliveryTests(database: url)
        try await serveLocally(apns.router, tls: tls) { apnsBase in
            try await serveLocally(fcm.router, tls: tls) { fcmBase in
                let environment = [
                    "BFF_RECALL_BASE_INTERVAL": "1", "BFF_JOBS_POLL_INTERVAL_MS": "100",
                    "BFF_APNS_KEY_FILE": try apns.keyFile(in: tls.directory), "BFF_APNS_KEY_ID": apns.keyID, "BFF_APNS_TEAM_ID": apns.teamID,
                    "BFF_APNS_TOPIC": apns.topic, "BFF_APNS_BASE_URL": apnsBase,
                    "BFF_FCM_CREDENTIALS_FILE": try fcm.credentialsFile(in: tls.directory, base: fcmBase), "BFF_FCM_BASE_URL": fcmBase,
                    "BFF_OUTBOUND_CA_FILE": tls.certificatePath,
                ]
                let app = try await makeTestApp(database: url, environment: environment)
                let repository = ChatStore.withOwnBatcher(Database(client: PostgresClient(configuration: url.clientConfiguration(poolSize: 2))))
                try await Commands.withDatabase(repository.database.client) { _ in
                    try await app.live { client async throws in
                        let learner = try await delivery.twoDevices(client, database: url)
                        #expect(try await client.call(.put, "/api/v1/settings", as: learner.phone, json: RecallTests.windowAroundNow()).status == .ok)
                        let chat = try await RecallTests.evaluatedChat(client, learner.phone, repository, score: 1)
                        let recall = try #require(try await RecallTests.recalls(client, learner.phone).first?["id"] as? String)
                        let firstInterval = try await RecallTests(database: url).interval(of: recall)
                        #expect(
                            try await eventually {
                                apns.received.withLockedValue { $0.count } == 1 && fcm.received.withLockedValue { $0.count } == 1
                            })
                        // Recorded once the services answered, a moment after they counted the requests.
                        #expect(try await eventually { try await delivery.status(client, learner.phone, recall) == "sent" })
                        // Each device's acceptance is recorded under its token's key, by the recall's one job.
                        let outcomes = try await delivery.recordedOutcomes(of: try #require(UUID(uuidString: recall)), userID: learner.userID)
                        #expect(outcomes.values.map(\.outcome) == ["accepted", "accepted"])
                        let deepLink = "learnapp://chats/\(chat)?recall=\(recall)"
                        #expect(apns.received.withLockedValue { $0.first?.payload["deep_link"] as? String } == deepLink)
                        #expect(
                            fcm.received.withLockedValue {
                                $0.first?.message.contains(deepLink.replacingOccurrences(of: "/", with: "\\/")) == true
                                    || $0.first?.message.contains(deepLink) == true
                            })
                        // The app followed the deep link.
                        #expect(try await client.call(.post, "/api/v1/recalls/\(recall)/opened", as: learner.phone).status == .noContent)
                        #expect(try await client.call(.get, "/api/v1/chats/\(chat)", as: learner.phone).json["status"] as? String == "in_progress")
                        let evaluated = try await client.call(.post, "/api/v1/recalls/\(recall)/evaluation", as: learner.phone, json: #"{"score":5}"#)
                        #expect(evaluated.status == .ok)
                        let next = try #require(evaluated.json["id"] as? String)
                        #expect(try await RecallTests(database: url).interval(of: next) > firstInterval)
                    }
                }
                #expect(apns.violations.withLockedValue { $0 }.isEmpty)
                #expect(fcm.violations.withLockedValue { $0 }.isEmpty)
            }
        }
    }
}
