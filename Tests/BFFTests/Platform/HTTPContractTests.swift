import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import BFF
@testable import BFFPlatform

/// The platform middleware seen from a client: errors, CORS, request ids, body cap, health and metrics.
@Suite("HTTP platform", .needsDatabase, .timeLimit(.minutes(3)))
struct HTTPContractTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    private static let json: HTTPFields = [.contentType: "application/json"]

    private func expectError(
        _ response: TestResponse, _ status: HTTPResponse.Status, _ code: String, of request: String = "",
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(response.status == status, "\(request) body: \(response.text)", sourceLocation: sourceLocation)
        #expect(response.errorCode == code, "\(request) body: \(response.text)", sourceLocation: sourceLocation)
        #expect((response.json["message"] as? String)?.isEmpty == false, sourceLocation: sourceLocation)
        #expect(response.json.count == 2, "only code and message: \(response.text)", sourceLocation: sourceLocation)
        #expect(response.headers[.contentType]?.hasPrefix("application/json") == true, sourceLocation: sourceLocation)
        #expect(response.headers[.requestID]?.isEmpty == false, sourceLocation: sourceLocation)
    }

    @Test("healthz answers 200; readyz answers 200 with the schema version")
    func healthAndReadiness() async throws {
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let health = try await client.execute(uri: "/healthz", method: .get)
            #expect(health.status == .ok)
            #expect(health.json["status"] as? String == "ok")
            let ready = try await client.execute(uri: "/readyz", method: .get)
            #expect(ready.status == .ok)
            #expect(ready.json["status"] as? String == "ready")
            let latest = try Migration.load(from: TestEnvironment.migrationsDirectory).last!.version
            #expect(ready.json["schema_version"] as? Int == latest)
        }
    }

    @Test("the server serves its contract at /openapi.yaml, and with BFF_API_DOCS_DIR an API reference at /docs/")
    func contractAndReference() async throws {
        let docs = FileManager.default.temporaryDirectory.appendingPathComponent("docs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: docs, withIntermediateDirectories: true)
        try Data("<html>Swagger UI</html>".utf8).write(to: docs.appendingPathComponent("index.html"))
        let contract = try String(contentsOf: TestEnvironment.repository.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let app = try await makeTestApp(
            database: database,
            environment: ["BFF_API_DOCS_DIR": docs.path, "BFF_OPENAPI_FILE": TestEnvironment.repository.appendingPathComponent("openapi.yaml").path])
        try await app.live { client in
            let served = try await client.execute(uri: "/openapi.yaml", method: .get)
            #expect(served.status == .ok && served.text == contract)
            #expect(served.headers[.contentType]?.hasPrefix("application/yaml") == true)
            let reference = try await client.execute(uri: "/docs/", method: .get)
            #expect(reference.status == .ok && reference.text.contains("Swagger UI"))
        }
        let without = try await makeTestApp(database: database, environment: ["BFF_OPENAPI_FILE": "/nonexistent/openapi.yaml"])
        try await without.live { client in
            expectError(try await client.execute(uri: "/openapi.yaml", method: .get), .notFound, "not_found")
            #expect(try await client.execute(uri: "/docs/", method: .get).status == .notFound)
        }
    }

    @Test("unknown route is 404 not_found; a known path with another method is 405 with Allow")
    func unknownRouteAndMethod() async throws {
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            expectError(try await client.execute(uri: "/api/v1/nothing-here", method: .get), .notFound, "not_found")
            let wrongMethod = try await client.execute(uri: "/healthz", method: .delete)
            expectError(wrongMethod, .methodNotAllowed, "method_not_allowed")
            #expect(wrongMethod.headers[.allow] == "GET")
        }
    }

    @Test("malformed JSON is 400 invalid_json; wrong types are 422 naming the field; wrong media type is 415")
    func bodyDecodingErrors() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            expectError(try await client.call(.post, "/api/v1/chats", as: learner, json: "{\"title\": "), .badRequest, "invalid_json")
            let wrongType = try await client.call(.post, "/api/v1/chats", as: learner, json: "{\"title\": 42}")
            expectError(wrongType, .unprocessableContent, "validation_failed")
            #expect((wrongType.json["message"] as? String)?.contains("title") == true)
            expectError(
                try await client.execute(
                    uri: "/api/v1/chats", method: .post,
                    headers: [.authorization: "Bearer \(learner.accessToken)", .contentType: "text/plain"], body: ByteBuffer(string: "hello")),
                .unsupportedMediaType, "unsupported_media_type")
            expectError(
                try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: ByteBuffer(string: "{}")),
                .unprocessableContent, "validation_failed")
        }
    }

    @Test("every protected operation of openapi.yaml answers 401 without a valid token, and 403 to a token lacking its scope, whatever else is wrong with the request")
    func tokenCheckedFirst() async throws {
        let operations = try Self.contractOperations()
        for operation in operations {
            #expect(operation.isPublic != !operation.scopes.isEmpty, "\(operation.name): public, or scopes")
        }
        let protected = operations.filter { !$0.isPublic }
        try #require(protected.count >= 15)
        // One learner per scope, holding every scope but that one.
        var learners: [String: Learner] = [:]
        for scope in AccessTokens.allScopes {
            learners[scope] = try await Learner.make(database: database, scopes: AccessTokens.allScopes.filter { $0 != scope })
        }
        let lacking = learners
        let credentials: [HTTPFields] = [[:], [.authorization: "Bearer not.a.token"], [.cookie: "__Secure-authjs.session-token=x"]]
        let app = try await makeTestApp(database: database, environment: WebLogin.environment)
        try await app.live { client in
            for operation in protected {
                let name = operation.name, method = HTTPRequest.Method(operation.method)!
                // A malformed path parameter, a limit that is no number, a body that is not JSON, and
                // the path as the router also takes it (empty segments skipped): each alone is a 4xx.
                let path = operation.path.replacing(/\{[a-z_]+\}/, with: "not%20an%20id")
                for uri in [path + "?limit=abc", "/" + path + "/"] {
                    for credential in credentials {
                        var headers: HTTPFields = [.contentType: "application/json"]
                        headers.append(contentsOf: credential)
                        let response = try await client.execute(uri: uri, method: method, headers: headers, body: ByteBuffer(string: "{"))
                        expectError(response, .unauthorized, "invalid_token", of: "\(operation.method) \(uri)")
                        #expect(response.headers[.wwwAuthenticate] == "Bearer error=\"invalid_token\"", "\(operation.method) \(uri)")
                    }
                    for scope in operation.scopes {
                        let response = try await client.call(method, uri, as: try #require(lacking[scope]), json: "{")
                        expectError(response, .forbidden, "insufficient_scope", of: "\(name) without \(scope): \(uri)")
                        let named = operation.scopes.joined(separator: " ")
                        #expect(response.headers[.wwwAuthenticate] == "Bearer error=\"insufficient_scope\", scope=\"\(named)\"", "\(name)")
                    }
                }
            }
            // The public operations reach their handlers whatever the credentials: a web client's
            // stale cookie must not stop its refresh.
            for operation in operations where operation.isPublic {
                for credential in credentials {
                    var headers: HTTPFields = [.contentType: "application/json"]
                    headers.append(contentsOf: credential)
                    let response = try await client.execute(
                        uri: operation.path, method: HTTPRequest.Method(operation.method)!, headers: headers, body: ByteBuffer(string: "{"))
                    #expect(response.status != .unauthorized || response.errorCode != "invalid_token", "\(operation.name): \(response.text)")
                }
            }
        }
    }

    /// The operations of openapi.yaml, read from its layout (paths at two spaces, methods at four,
    /// an operation's own `security` at six and its requirement at eight).
    static func contractOperations() throws -> [ContractOperation] {
        let contract = try String(contentsOf: TestEnvironment.repository.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        var operations: [ContractOperation] = []
        var path: String?
        for line in contract.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "components:" { break }
            if let match = line.wholeMatch(of: /\ \ (\/[^ ]*):/) {
                path = String(match.1)
            } else if let path, let match = line.wholeMatch(of: /\ {4}(get|put|post|patch|delete):/) {
                let method = match.1.uppercased()
                operations.append(ContractOperation(name: "\(method) \(path)", method: method, path: path))
            } else if let match = line.wholeMatch(of: /\ {6}operationId: ([A-Za-z]+)/), !operations.isEmpty {
                operations[operations.count - 1].id = String(match.1)
            } else if line == "      security: []", !operations.isEmpty {
                operations[operations.count - 1].isPublic = true
            } else if line == "        - revenueCatWebhook: []", !operations.isEmpty {
                // RevenueCat's webhook carries its own credential, not the app's token.
                operations[operations.count - 1].isPublic = true
                operations[operations.count - 1].isWebhook = true
            } else if let match = line.wholeMatch(of: /\ {8}- bearerAuth: \[(.*)\]/), !operations.isEmpty {
                operations[operations.count - 1].scopes = match.1.split(separator: ",").map {
                    $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "'"))
                }
            }
        }
        return operations
    }

    struct ContractOperation {
        var name: String
        var method: String
        var path: String
        var id = ""
        var isPublic = false
        var isWebhook = false
        var scopes: [String] = []
    }

    @Test("without RevenueCat configured, verification is 503 store_unavailable once the caller is authorised, and the webhook refuses every delivery")
    func storeNotConfigured() async throws {
        let learner = try await Learner.make(database: database)
        let profileOnly = try await Learner.make(database: database, scopes: ["profile:read"])
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let purchase = #"{"platform":"ios","product_id":"premium.monthly","receipt":"abc"}"#
            expectError(
                try await client.execute(uri: "/api/v1/iap/verify", method: .post, headers: Self.json, body: ByteBuffer(string: purchase)),
                .unauthorized, "invalid_token")
            expectError(try await client.call(.post, "/api/v1/iap/verify", as: profileOnly, json: purchase), .forbidden, "insufficient_scope")
            expectError(try await client.call(.post, "/api/v1/iap/verify", as: learner, json: purchase), .serviceUnavailable, "store_unavailable")
            let event = ByteBuffer(string: #"{"event": {"id": "e1", "type": "RENEWAL"}}"#)
            var headers = Self.json
            headers[.authorization] = "anything at all, nothing is configured"
            expectError(
                try await client.execute(uri: "/api/v1/iap/revenuecat/webhook", method: .post, headers: headers, body: event),
                .serviceUnavailable, "store_unavailable")
        }
    }

    @Test("a body over 64 KiB is 413, declared or streamed, once the caller is authenticated; without a token it is 401 and never read")
    func bodyCap() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let big = ByteBuffer(string: "{\"title\": \"" + String(repeating: "a", count: 70 * 1024) + "\"}")
            expectError(
                try await client.execute(uri: "/api/v1/chats", method: .post, headers: learner.headers, body: big),
                .contentTooLarge, "payload_too_large")
            let anonymous = try await client.execute(uri: "/api/v1/chats", method: .post, headers: Self.json, body: big)
            expectError(anonymous, .unauthorized, "invalid_token")
            #expect(anonymous.headers[.connection] == "close")

            // Chunked, with no length declared: the cap is found while reading.
            var streamed = HTTPClientRequest(url: "http://127.0.0.1:\(client.port!)/api/v1/chats")
            streamed.method = .POST
            streamed.headers.add(name: "Content-Type", value: "application/json")
            streamed.headers.add(name: "Authorization", value: "Bearer \(learner.accessToken)")
            streamed.body = .bytes(Array(repeating: UInt8(ascii: "a"), count: 70 * 1024), length: .unknown)
            let response = try await HTTPClient.shared.execute(streamed, timeout: .seconds(10))
            #expect(response.status == .payloadTooLarge)
            let body = try await response.body.collect(upTo: 4096)
            #expect(String(buffer: body).contains("payload_too_large"))
        }
    }

    @Test("a body that stalls past BFF_BODY_READ_TIMEOUT closes the connection without an answer")
    func stalledBody() async throws {
        let learner = try await Learner.make(database: database)
        let logs = LogCapture()
        let app = try await makeTestApp(database: database, environment: ["BFF_BODY_READ_TIMEOUT": "1"], logs: logs)
        try await app.live { client in
            let port = try #require(client.port)
            let start = ContinuousClock.now
            let answer = try await RawHTTP.send(
                "POST /api/v1/chats HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(learner.accessToken)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"title\":", port: port)
            #expect(answer.status == 0 && answer.head.isEmpty, "no answer at all: \(answer.head)")
            #expect(ContinuousClock.now - start < .seconds(10))
        }
        #expect(logs.entries().contains { $0["msg"] as? String == "request body stalled; connection closed without an answer" })
        #expect(
            try await database.withClient { client in
                for try await count in try await client.query("SELECT count(*)::int FROM chats WHERE user_id = \(learner.id)").decode(Int.self) {
                    return count
                }
                return -1
            } == 0)
    }

    @Test("an unexpected error is 500 internal without detail, and is logged with the request id")
    func internalErrorIsOpaque() async throws {
        struct Boom: Error, CustomStringConvertible { var description: String { "SELECT secret FROM somewhere; stack frame 42" } }
        let logs = LogCapture()
        let boom = Operation(id: "testBoom", method: .get, path: "/test/boom", policy: .init(access: .anyone))
        let app = try await makeTestApp(
            database: database, logs: logs,
            extraRoutes: [(boom, { router in router.get("/test/boom") { _, _ -> Response in throw Boom() } })])
        try await app.live { client in
            let response = try await client.execute(uri: "/test/boom", method: .get, headers: [.requestID: "req-500-check"])
            expectError(response, .internalServerError, "internal")
            #expect(!response.text.contains("SELECT"))
            #expect(!response.text.contains("stack"))
            #expect(response.headers[.requestID] == "req-500-check")
        }
        let errorLines = logs.entries().filter { $0["level"] as? String == "error" && $0["msg"] as? String == "unhandled error" }
        #expect(errorLines.count == 1)
        #expect(errorLines.first?["request_id"] as? String == "req-500-check")
    }

    @Test("a streaming operation's steps and handler run in a task that has ended before its body is written; others in the connection's")
    func streamingHandlersRunInAChildTask() async throws {
        let tasks = NIOLockedValueBox<[String: [Int]]>([:])
        @Sendable func record(_ key: String) {
            let task = withUnsafeCurrentTask { $0?.hashValue } ?? 0
            tasks.withLockedValue { $0[key, default: []].append(task) }
        }
        func route(_ id: String, streams: Bool) -> (operation: BFF.Operation, register: (Router<AppRequestContext>) -> Void) {
            let path = "/test/\(id)"
            return (
                Operation(id: id, method: .get, path: path, policy: .init(access: .anyone, streams: streams)),
                { router in
                    router.get(RouterPath(path)) { _, context -> Response in
                        record("\(id).handler")
                        // The context the steps built reaches the handler in the child task too.
                        #expect(context.requestID == "req-\(id)")
                        return Response(
                            status: .ok, headers: [.contentType: "text/plain"],
                            body: ResponseBody { writer in
                                record("\(id).body")
                                try await writer.write(ByteBuffer(string: "streamed"))
                                try await writer.finish(nil)
                            })
                    }
                }
            )
        }
        let app = try await makeTestApp(database: database, extraRoutes: [route("testStream", streams: true), route("testAtOnce", streams: false)])
        try await app.live { client in
            for id in ["testStream", "testAtOnce"] {
                let response = try await client.execute(uri: "/test/\(id)", method: .get, headers: [.requestID: "req-\(id)"])
                #expect(response.status == .ok && response.text == "streamed")
                #expect(response.headers[.requestID] == "req-\(id)")
            }
        }
        let seen = tasks.withLockedValue { $0 }
        let streamHandler = try #require(seen["testStream.handler"]?.first), streamBody = try #require(seen["testStream.body"]?.first)
        let onceHandler = try #require(seen["testAtOnce.handler"]?.first), onceBody = try #require(seen["testAtOnce.body"]?.first)
        #expect(streamHandler != streamBody)
        #expect(onceHandler == onceBody)
        #expect(OperationTable.all.filter(\.policy.streams).map(\.id).sorted() == ["chatTurn", "exportMe"])
    }

    @Test("X-Request-Id is echoed when well formed, generated otherwise, and on every log line of the request")
    func requestID() async throws {
        let logs = LogCapture()
        let app = try await makeTestApp(database: database, logs: logs)
        try await app.live { client in
            let echoed = try await client.execute(uri: "/healthz", method: .get, headers: [.requestID: "abc-123.x"])
            #expect(echoed.headers[.requestID] == "abc-123.x")
            let generated = try await client.execute(uri: "/healthz", method: .get)
            #expect(UUID(uuidString: generated.headers[.requestID] ?? "") != nil)
            let unsafe = try await client.execute(uri: "/healthz", method: .get, headers: [.requestID: "bad id\" with quotes"])
            #expect(unsafe.headers[.requestID] != "bad id\" with quotes")
            #expect(UUID(uuidString: unsafe.headers[.requestID] ?? "") != nil)
        }
        let accessLines = logs.entries().filter { $0["msg"] as? String == "request" }
        #expect(accessLines.count == 3)
        #expect(accessLines.allSatisfy { ($0["request_id"] as? String)?.isEmpty == false })
        #expect(accessLines.first?["request_id"] as? String == "abc-123.x")
    }

    @Test("a log line keeps at most 4 KiB of any one value, cut at a character boundary")
    func longValuesAreCut() throws {
        let logs = LogCapture()
        var logger = makeLogger(level: .info, sink: logs.sink)
        logger[metadataKey: "path"] = .string("/" + String(repeating: "é", count: 5000))
        logger.info("\(String(repeating: "x", count: 10_000))")
        let line = try #require(logs.entries().first)
        let message = try #require(line["msg"] as? String), path = try #require(line["path"] as? String)
        #expect(message.hasSuffix("…(truncated)") && message.utf8.count < 4200)
        #expect(path.hasSuffix("…(truncated)") && path.utf8.count < 4200 && path.dropLast(12).allSatisfy { $0 == "é" || $0 == "/" })
    }

    @Test("CORS: an allow-listed origin is echoed without credentials; a foreign one gets no CORS headers; OPTIONS is 204")
    func cors() async throws {
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let allowed = try await client.execute(uri: "/healthz", method: .get, headers: [.origin: "https://app.example.com"])
            #expect(allowed.headers[.accessControlAllowOrigin] == "https://app.example.com")
            #expect(allowed.headers[.accessControlAllowCredentials] == "false")

            let foreign = try await client.execute(uri: "/healthz", method: .get, headers: [.origin: "https://evil.example"])
            #expect(foreign.status == .ok)
            #expect(foreign.headers[.accessControlAllowOrigin] == nil)

            let preflight = try await client.execute(
                uri: "/api/v1/chats", method: .options,
                headers: [
                    .origin: "https://app.example.com", .accessControlRequestMethod: "POST",
                    .accessControlRequestHeaders: "authorization, content-type",
                ])
            #expect(preflight.status == .noContent)
            #expect(preflight.headers[.accessControlAllowOrigin] == "https://app.example.com")
            #expect(preflight.headers[.accessControlAllowCredentials] == "false")
            let allowHeaders = Set(
                (preflight.headers[.accessControlAllowHeaders] ?? "").lowercased()
                    .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            // The web's create sends Idempotency-Key, and any call may send its X-Request-Id.
            #expect(allowHeaders == ["authorization", "content-type", "idempotency-key", "x-request-id"], "\(allowHeaders)")
            let exposed = (allowed.headers[.accessControlExposeHeaders] ?? "").lowercased()
            #expect(exposed.contains("x-request-id") && exposed.contains("retry-after") && exposed.contains("ratelimit-remaining"))

            let foreignPreflight = try await client.execute(uri: "/api/v1/chats", method: .options, headers: [.origin: "https://evil.example"])
            #expect(foreignPreflight.status == .noContent)
            #expect(foreignPreflight.headers[.accessControlAllowOrigin] == nil)

            let unknownPath = try await client.execute(uri: "/no/such/path", method: .options)
            #expect(unknownPath.status == .noContent)
        }
    }

    @Test(
        "the admin listener serves /metrics (request counts and latency by route and status, pool gauges, process and build metrics), /healthz and /readyz; the public port has no /metrics"
    )
    func metrics() async throws {
        let logs = LogCapture()
        let app = try await makeTestApp(database: database, environment: ["BFF_ADMIN_PORT": "0"], logs: logs)
        try await app.live { client in
            let admin = "http://127.0.0.1:\(try await logs.adminPort())"
            func get(_ path: String) async throws -> (status: UInt, text: String) {
                let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: admin + path), timeout: .seconds(10))
                return (response.status.code, String(buffer: try await response.body.collect(upTo: 1 << 22)))
            }
            // The registry is the process's: other suites' requests may add to the same series.
            func healthzCount() async throws -> Double {
                let line = try await get("/metrics").text.split(separator: "\n").first {
                    $0.hasPrefix("bff_http_requests_total{") && $0.contains("route=\"/healthz\"")
                        && $0.contains("method=\"GET\"") && $0.contains("status=\"200\"")
                }
                return line.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) } ?? 0
            }
            let before = try await healthzCount()
            for _ in 0..<3 { _ = try await client.execute(uri: "/healthz", method: .get) }
            #expect(try await healthzCount() >= before + 3)

            #expect(try await client.execute(uri: "/metrics", method: .get).status == .notFound)
            let health = try await get("/healthz")
            #expect(health.status == 200 && health.text == #"{"status":"ok","version":"\#(BuildInfo.version)"}"#)
            let ready = try await get("/readyz")
            #expect(ready.status == 200 && ready.text.contains(#""status":"ready""#), "\(ready.text)")
            #expect(try await client.execute(uri: "/healthz", method: .get).json["version"] as? String == BuildInfo.version)

            let propfind = try await client.execute(uri: "/no/such/path", method: HTTPRequest.Method("PROPFIND")!)
            #expect(propfind.status == .notFound)
            let metrics = try await get("/metrics")
            #expect(metrics.status == 200)
            for expected in [
                "bff_http_request_duration_seconds_bucket", "bff_db_pool_max_connections", "method=\"other\"", "bff_ready 1",
                #"bff_build_info{version="\#(BuildInfo.version)",commit="\#(BuildInfo.commit)"} 1"#,
                "# TYPE process_cpu_seconds_total counter", "process_resident_memory_bytes ", "process_open_fds ", "process_start_time_seconds ",
            ] {
                #expect(metrics.text.contains(expected), "\(expected)")
            }
            #expect(!metrics.text.contains("PROPFIND"))
            #expect(try await get("/api/v1/me").status == 404, "the admin listener serves nothing else")
        }
    }
}
