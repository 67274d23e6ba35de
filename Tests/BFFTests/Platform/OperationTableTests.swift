import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// One operation table decides every route's policy, on the operation the router matched: a path
/// the router takes under another spelling gets exactly the canonical operation's policy, and one
/// it does not take is 404/405 before any policy step.
@Suite("Operation table", .needsDatabase, .timeLimit(.minutes(4)))
struct OperationTableTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    @Test("the table holds every operation of openapi.yaml with its id, method, path and security, and the routes beside it")
    func tableMatchesContract() throws {
        let contract = try HTTPContractTests.contractOperations()
        #expect(contract.count == OperationTable.contract.count)
        for operation in contract {
            let entry = try #require(OperationTable.contract.first { $0.id == operation.id }, "\(operation.id) has no entry")
            #expect(entry.method.rawValue == operation.method && entry.path == operation.path, "\(operation.id)")
            if operation.isWebhook {
                #expect(entry.policy.access == .revenueCatWebhook, "\(operation.id)")
            } else if operation.isPublic {
                #expect(entry.policy.access == .anyone, "\(operation.id)")
            } else {
                #expect(entry.policy.access == .scopes(operation.scopes.compactMap(Scope.init(rawValue:))), "\(operation.id)")
                #expect(operation.scopes.allSatisfy { Scope(rawValue: $0) != nil }, "\(operation.id): \(operation.scopes)")
            }
        }
        let ids = OperationTable.all.map(\.id)
        #expect(Set(ids).count == ids.count, "operation ids are unique")
        // Metrics are on the admin listener, never on the public port.
        #expect(Set(OperationTable.beside.map(\.path)) == ["/docs", "/docs/**"])
        // Probes make no traces; everything else does.
        #expect(Set(OperationTable.all.filter { !$0.policy.traced }.map(\.id)) == ["getHealthz", "getReadyz"])
    }

    /// The spellings an attacker tries for `path`: each is either not routed or routed to the same
    /// operation by the router's trie.
    static func spellings(of path: String) -> [String] {
        var result = [path + "/", "/" + path, path.uppercased()]
        let slashes = path.indices.filter { path[$0] == "/" && $0 != path.startIndex }
        if let inner = slashes.first {
            result.append(path.replacingCharacters(in: inner...inner, with: "//"))
            result.append(path.replacingCharacters(in: inner...inner, with: "/./"))
            result.append(path.replacingCharacters(in: inner...inner, with: "%2F"))
            result.append(path.replacingCharacters(in: inner...inner, with: "/../x/"))
        } else {
            result.append(path + "/.")
            result.append("/." + path)
        }
        return result
    }

    @Test("every operation under every spelling (/ appended, // inside, /. raw, %2F, upper case) is 404/405 or gets the canonical operation")
    func spellingsResolveToTheCanonicalOperation() async throws {
        let logs = LogCapture()
        let app = try await makeTestApp(database: database, logs: logs)
        let requests = NIOLockedValueBox<[(id: String, operation: BFF.Operation, target: String, status: Int)]>([])
        try await app.live { client in
            let port = try #require(client.port)
            for operation in OperationTable.all {
                let canonical = operation.path.replacing(/\{[a-z_]+\}/, with: "0b7c6a5e-1d2f-4a3b-8c9d-0e1f2a3b4c5d")
                    .replacing("/**", with: "/index.html")
                for target in [canonical] + Self.spellings(of: canonical) {
                    let id = "spelling-\(requests.withLockedValue { $0.count })"
                    let body: String? = operation.method == .get || operation.method == .delete ? nil : "{}"
                    let answer = try await RawHTTP.send(
                        RawHTTP.message(operation.method.rawValue, target, headers: ["X-Request-Id: \(id)"], body: body), port: port)
                    requests.withLockedValue { $0.append((id, operation, target, answer.status)) }
                }
            }
        }
        let sent = requests.withLockedValue { $0 }
        let resolved = Dictionary(
            logs.entries().filter { $0["msg"] as? String == "request" }.compactMap { entry -> (String, String)? in
                guard let id = entry["request_id"] as? String, let operation = entry["operation"] as? String else { return nil }
                return (id, operation)
            }, uniquingKeysWith: { first, _ in first })
        #expect(sent.count > OperationTable.all.count * 6)
        var routedSpellings = 0
        for request in sent {
            let operation = try #require(resolved[request.id], "\(request.target): no request log line")
            if operation == "none" {
                #expect([404, 405].contains(request.status), "\(request.operation.method) \(request.target) resolved to nothing but answered \(request.status)")
            } else {
                // The same operation, or one of exactly its policy (`/docs/.` is the reference's file route).
                let policy = OperationTable.operation(id: operation)?.policy
                #expect(
                    operation == request.operation.id || policy == request.operation.policy,
                    "\(request.operation.method) \(request.target) resolved to \(operation)")
                if request.target != request.operation.path { routedSpellings += 1 }
            }
        }
        // The router does take `/`-appended and `//` spellings: they are walked, not just refused.
        #expect(routedSpellings >= OperationTable.all.count * 2)
    }

    @Test("the RevenueCat webhook under any spelling without its credential is refused and stores nothing; unconfigured, it is 503")
    func webhookSpellings() async throws {
        let user = UUID()
        let event = #"{"api_version": "1.0", "event": {"id": "spelled-1", "type": "RENEWAL", "app_user_id": "\#(user.uuidString.lowercased())"}}"#
        let targets = ["/api/v1/iap/revenuecat/webhook/", "//api/v1/iap/revenuecat/webhook", "/api/v1//iap/revenuecat/webhook//"]
        let configured = try await makeTestApp(database: database, environment: ["BFF_REVENUECAT_WEBHOOK_AUTH": "Bearer the-secret"])
        try await configured.live { client in
            let port = try #require(client.port)
            for target in targets {
                for authorization in [[], ["Authorization: Bearer wrong"]] {
                    let answer = try await RawHTTP.send(RawHTTP.message("POST", target, headers: authorization, body: event), port: port)
                    #expect(answer.status == 401 && answer.body.contains("webhook_unauthorized"), "\(target): \(answer.status) \(answer.body)")
                }
            }
        }
        let unconfigured = try await makeTestApp(database: database)
        try await unconfigured.live { client in
            let port = try #require(client.port)
            for target in targets {
                let answer = try await RawHTTP.send(RawHTTP.message("POST", target, body: event), port: port)
                #expect(answer.status == 503 && answer.body.contains("store_unavailable"), "\(target): \(answer.status) \(answer.body)")
            }
        }
        let stored = try await database.withClient { client in
            for try await count in try await client.query(
                "SELECT (SELECT count(*) FROM revenuecat_events) + (SELECT count(*) FROM jobs WHERE kind = \(SubscriptionSync.kind))"
            ).decode(Int.self) {
                return count
            }
            return -1
        }
        #expect(stored == 0)
    }

    @Test("a refusal given before the body is read closes the connection instead of draining the body")
    func refusalBeforeBodyCloses() async throws {
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let port = try #require(client.port)
            // Declares 60 KiB and sends 10 bytes: answered 401 at once and closed, never waiting for the rest.
            let request = "POST /api/v1/chats HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 61440\r\n\r\n{\"title\":"
            let answer = try await RawHTTP.send(request, port: port)
            #expect(answer.status == 401)
            #expect(answer.head.lowercased().contains("connection: close"), "\(answer.head)")
        }
    }
}
