import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@testable import BFF
@testable import BFFPlatform

/// Many learners behind one address (a school's Wi-Fi, a carrier-grade NAT) under the default
/// limits: none of them is refused for the others' requests, while one device cannot use up the
/// address's budget.
@Suite("One school behind one address", .needsDatabase, .timeLimit(.minutes(3)))
struct SchoolNetworkTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    @Test("300 learners' sessions refresh from one address within a minute, all of them, under the default limits")
    func refreshesFromOneAddress() async throws {
        let targets = (0..<300).map { (userID: UUID(), deviceID: "school-device-\($0)") }
        let pairs = try await Commands.issueTokens(
            environment: TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"]),
            for: targets, scopes: AccessTokens.allScopes, concurrency: 4)
        let app = try await makeTestApp(database: database)
        let clock = ContinuousClock()
        let started = clock.now
        let statuses = try await app.live { client in
            var statuses: [HTTPResponse.Status] = []
            for (pair, target) in zip(pairs, targets) {
                let response = try await client.execute(
                    uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: #"{"refresh_token":"\#(pair.refreshToken)","device_id":"\#(target.deviceID)"}"#))
                statuses.append(response.status)
                #expect(response.headers[.rateLimitLimit] == nil)
            }
            return statuses
        }
        #expect(clock.now - started < .seconds(60), "the refreshes must fall within one minute to test the limit")
        #expect(statuses.count == 300 && statuses.allSatisfy { $0 == .ok }, "\(Dictionary(grouping: statuses, by: \.code).mapValues(\.count))")
    }

    @Test("100 learners sign in from one address within a minute, all of them, under the default limits")
    func loginsFromOneAddress() async throws {
        try await LocalIdP().serve { [database] idp in
            let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer, "BFF_LOG_LEVEL": "warning"])
            let clock = ContinuousClock()
            let started = clock.now
            let statuses = try await app.live { client in
                var statuses: [HTTPResponse.Status] = []
                for learner in 0..<100 {
                    var claims = TestIDClaims(iss: .init(value: idp.issuer))
                    claims.sub = .init(value: "learner-\(learner)")
                    let response = try await idp.signIn(AppLogin(deviceID: "school-ipad-\(learner)"), as: claims, with: client)
                    statuses.append(response.status)
                }
                return statuses
            }
            #expect(clock.now - started < .seconds(60), "the logins must fall within one minute to test the limit")
            #expect(statuses.allSatisfy { $0 == .ok }, "\(Dictionary(grouping: statuses, by: \.code).mapValues(\.count))")
        }
    }

    @Test("one device id hammering the login start is limited (20 a minute), with its own RateLimit-* headers; other devices behind the same address are not")
    func oneDeviceIsLimited() async throws {
        try await LocalIdP().serve { [database] idp in
            let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer])
            try await app.live { client in
                // The limit is GCRA's: a burst of 20, then one more every 3 s. However slowly this
                // machine sends them, no more than that passes before a refusal.
                let hammering = AppLogin(deviceID: "hammering-device")
                let clock = ContinuousClock()
                let started = clock.now
                var allowed = 0
                var limited: TestResponse?
                while limited == nil, allowed < 60 {
                    let response = try await client.execute(uri: hammering.startURI, method: .get)
                    // The device's limit is the tighter one, so its headers are the ones shown.
                    #expect(response.headers[.rateLimitLimit] == "20")
                    if response.status == .ok { allowed += 1 } else { limited = response }
                }
                let elapsed = (clock.now - started).seconds
                #expect(allowed >= 20 && Double(allowed) <= 21 + elapsed / 3, "\(allowed) allowed in \(elapsed) s")
                let refused = try #require(limited)
                #expect(refused.status == .tooManyRequests && refused.errorCode == "rate_limited", "\(refused.text)")
                #expect(Int(refused.headers[.retryAfter] ?? "") ?? 0 >= 1)
                #expect(refused.headers[.rateLimitRemaining] == "0")
                let neighbour = try await client.execute(uri: AppLogin(deviceID: "neighbour-device").startURI, method: .get)
                #expect(neighbour.status == .ok)
                #expect(neighbour.headers[.rateLimitRemaining] == "19")
            }
        }
    }
}
