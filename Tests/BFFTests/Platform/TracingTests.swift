import Foundation
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// OpenTelemetry traces from a real `bff serve`, exported over OTLP/HTTP to a local collector.
@Suite("Traces over OTLP/HTTP", .needsDatabase, .timeLimit(.minutes(2)))
struct TracingTests {
    @Test("behind a gateway (BFF_TRACE_TRUST_INCOMING=true) a request continues the caller's trace: route-named server span, database and LLM child spans, traceparent sent on, trace id in its logs")
    func requestTrace() async throws {
        try await withCollectorAndLLM(["BFF_TRACE_TRUST_INCOMING": "true"]) { environment, collector, llm, learner in
            // The jobs run in a worker process of their own, traced as well.
            let server = try BFFProcess(["serve"], environment: environment.merging(["BFF_JOBS_CONCURRENCY": "0"]) { $1 }, port: try await BFFProcess.freePort())
            defer { server.stop() }
            let worker = try BFFProcess(["jobs", "work"], environment: environment.merging(["BFF_JOBS_CONCURRENCY": "2"]) { $1 })
            defer { worker.stop() }
            #expect(try await server.becomesReady())

            // The app's own span, as a client instrumented with OpenTelemetry sends it.
            let traceID = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            let appSpanID = "00f067aa0ba902b7"
            let turn = try await BFFProcess.send(
                .POST, "\(server.base)/api/v1/chat", token: learner.accessToken, json: #"{"message": "植物は光合成をします。"}"#,
                headers: [("traceparent", "00-\(traceID)-\(appSpanID)-01")])
            #expect(turn.status == 200)
            let missing = UUID().uuidString.lowercased()
            #expect(try await BFFProcess.send(.GET, "\(server.base)/api/v1/chats/\(missing)", token: learner.accessToken).status == 404)

            let done = try await eventually(within: .seconds(20), every: .milliseconds(100)) {
                let spans = collector.spans.withLockedValue { $0 }
                return spans.contains { $0.name == "GET /api/v1/chats/{chat_id}" } && spans.contains { $0.name.hasPrefix("job tags.extract") }
                    && spans.contains { $0.name == "llm chat completion" && $0.traceID != traceID }
            }
            let spans = collector.spans.withLockedValue { $0 }
            #expect(done, "\(spans.map(\.name))")
            #expect(collector.violations.withLockedValue { $0 }.isEmpty)
            #expect(llm.violations.withLockedValue { $0 }.isEmpty)

            // The turn's server span is the child of the app's, named by its route.
            let request = try #require(spans.first { $0.traceID == traceID && $0.kind == 2 }, "\(spans.map(\.name))")
            #expect(request.name == "POST /api/v1/chat")
            #expect(request.parentSpanID == appSpanID)
            #expect(request.attributes["http.route"] == "/api/v1/chat" && request.attributes["http.response.status_code"] == "200")
            #expect(request.resource["service.name"] == "bff")
            func descends(_ span: LocalOTLPCollector.Span, from ancestor: LocalOTLPCollector.Span) -> Bool {
                var parent = span.parentSpanID
                while let id = parent {
                    if id == ancestor.spanID { return true }
                    parent = spans.first { $0.spanID == id }?.parentSpanID
                }
                return false
            }
            let database = spans.filter { $0.traceID == traceID && $0.name.hasPrefix("postgresql ") }
            #expect(!database.isEmpty && database.allSatisfy { $0.kind == 3 && descends($0, from: request) }, "\(database.map(\.name))")
            #expect(database.contains { $0.attributes["db.system.name"] == "postgresql" })
            // The turn is three round trips to PostgreSQL: its read and its admission before the LLM,
            // its store after (each span is one statement).
            #expect(database.map(\.name).sorted() == ["postgresql TurnStore.admit", "postgresql TurnStore.snapshot", "postgresql TurnStore.store"])

            // The LLM call: a client span under the request, whose id the LLM received as traceparent's parent.
            let llmSpan = try #require(spans.first { $0.traceID == traceID && $0.name == "llm chat completion" })
            #expect(llmSpan.kind == 3 && descends(llmSpan, from: request) && llmSpan.attributes["http.response.status_code"] == "200")
            let turnCall = try #require(llm.received.withLockedValue { $0.first { $0.responseFormat == nil } })
            #expect(turnCall.traceparent == "00-\(traceID)-\(llmSpan.spanID)-01")

            // The tag job afterwards, on the worker: a trace of its own, rooted in the job's consumer span.
            let job = try #require(spans.first { $0.name == "job tags.extract" })
            #expect(job.kind == 5 && job.parentSpanID == nil && job.attributes["bff.job.attempt"] == "1")
            #expect(spans.contains { $0.traceID == job.traceID && $0.name == "llm chat completion" && descends($0, from: job) })

            // Probes and the worker's polls make no traces; database calls are always within a request or a job.
            #expect(!spans.contains { $0.name.contains("/readyz") })
            #expect(spans.allSatisfy { !$0.name.hasPrefix("postgresql ") || $0.parentSpanID != nil }, "\(spans.filter { $0.parentSpanID == nil }.map(\.name))")

            // Route templates, never ids: no span names or records the user, the token or the chat id asked for.
            let notFound = try #require(spans.first { $0.name == "GET /api/v1/chats/{chat_id}" })
            #expect(notFound.attributes["http.response.status_code"] == "404")
            for span in spans {
                let text = ([span.name] + span.attributes.keys + span.attributes.values).joined(separator: " ").lowercased()
                #expect(!text.contains(learner.id.uuidString.lowercased()) && !text.contains(missing), "\(span.name) \(span.attributes)")
                #expect(!text.contains(learner.accessToken.lowercased()))
            }

            // The request's log lines carry its trace id.
            let lines = server.logLines().filter { $0["request_id"] as? String == request.attributes["bff.request_id"] }
            #expect(!lines.isEmpty && lines.allSatisfy { $0["trace_id"] as? String == traceID }, "\(lines)")
        }
    }

    @Test("by default a client's traceparent neither forces nor suppresses sampling: a new root span links to it, and no tracestate goes on to the LLM")
    func untrustedTraceparent() async throws {
        try await withCollectorAndLLM(["BFF_JOBS_CONCURRENCY": "0"]) { environment, collector, llm, learner in
            let server = try BFFProcess(["serve"], environment: environment, port: try await BFFProcess.freePort())
            defer { server.stop() }
            #expect(try await server.becomesReady())
            let traceID = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            let appSpanID = "00f067aa0ba902b7"
            // Sampled flag 00: the app asks not to trace, and sends vendor state along.
            let turn = try await BFFProcess.send(
                .POST, "\(server.base)/api/v1/chat", token: learner.accessToken, json: #"{"message": "植物は光合成をします。"}"#,
                headers: [("traceparent", "00-\(traceID)-\(appSpanID)-00"), ("tracestate", "vendor=secret-of-the-app")])
            #expect(turn.status == 200)
            let done = try await eventually(within: .seconds(20), every: .milliseconds(100)) {
                collector.spans.withLockedValue { $0 }.contains { $0.name == "POST /api/v1/chat" }
            }
            #expect(done)
            let spans = collector.spans.withLockedValue { $0 }
            let request = try #require(spans.first { $0.name == "POST /api/v1/chat" })
            #expect(request.traceID != traceID && request.parentSpanID == nil, "a new root span")
            #expect(request.links == ["\(traceID)-\(appSpanID)"])
            #expect(!spans.contains { $0.traceID == traceID })
            let call = try #require(llm.received.withLockedValue { $0.first { $0.responseFormat == nil } })
            #expect(call.traceparent?.contains(request.traceID) == true)
            #expect(call.tracestate == nil)
        }
    }

    @Test("a collector that refuses, garbles, drops or stalls costs requests nothing, and a stalled one does not hold the shutdown")
    func collectorFaults() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        let learner = try await Learner.make(database: database)
        let collector = LocalOTLPCollector()
        collector.script.withLockedValue { $0 = [.refuse(status: 503, reason: "busy", retryAfter: 1), .refuse(status: 429, reason: "slow down", retryAfter: 1), .garbage(status: 200), .drop] }
        try await serveHTTP1(collector.router, logger: TestEnvironment.quietLogger) { collectorBase in
            let environment = TestEnvironment.serverEnvironment(
                database: database,
                [
                    "OTEL_EXPORTER_OTLP_ENDPOINT": collectorBase, "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_EXPORTER_OTLP_TIMEOUT": "2000",
                    "BFF_SHUTDOWN_GRACE": "10", "BFF_JOBS_CONCURRENCY": "0",
                ])
            let server = try BFFProcess(["serve"], environment: environment, port: try await BFFProcess.freePort())
            defer { server.stop() }
            #expect(try await server.becomesReady())
            // Requests go on, each as quick as ever, while exports are refused, garbled and dropped.
            var slowest = Duration.zero
            var statuses: Set<UInt> = []
            while collector.exports.withLockedValue({ $0 }) < 6 {
                let started = ContinuousClock.now
                statuses.insert(try await BFFProcess.send(.GET, "\(server.base)/api/v1/me", token: learner.accessToken).status)
                slowest = max(slowest, ContinuousClock.now - started)
                try await Task.sleep(for: .milliseconds(150))
            }
            #expect(statuses == [200] && slowest < .seconds(1), "\(statuses) \(slowest)")
            // After the faults the exporter still delivers.
            #expect(try await eventually(within: .seconds(10)) { collector.spans.withLockedValue { $0 }.contains { $0.name == "GET /api/v1/me" } })

            // A collector that stops answering: requests still go through, and SIGTERM still ends the process within the grace.
            collector.script.withLockedValue { $0 = Array(repeating: .stall(.seconds(15)), count: 50) }
            for _ in 0..<5 {
                let started = ContinuousClock.now
                #expect(try await BFFProcess.send(.GET, "\(server.base)/api/v1/me", token: learner.accessToken).status == 200)
                #expect(ContinuousClock.now - started < .seconds(1))
                try await Task.sleep(for: .milliseconds(200))
            }
            let stopping = ContinuousClock.now
            kill(server.process.processIdentifier, SIGTERM)
            server.process.waitUntilExit()
            #expect(ContinuousClock.now - stopping < .seconds(12))
            #expect(server.process.terminationStatus == 0)
            #expect(collector.violations.withLockedValue { $0 }.isEmpty)
        }
    }

    /// A local collector and LLM, a learner, and the server environment pointing at both with `extra`.
    private func withCollectorAndLLM(
        _ extra: [String: String],
        _ body: @escaping @Sendable ([String: String], LocalOTLPCollector, LocalLLM, Learner) async throws -> Void
    ) async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        let learner = try await Learner.make(database: database)
        let collector = LocalOTLPCollector()
        let llm = LocalLLM { request, _ in request.responseFormat != nil ? .reply([#"{"misconceptions":[]}"#]) : .reply(["どうして？"]) }
        try await serveHTTP1(collector.router, logger: TestEnvironment.quietLogger) { collectorBase in
            try await serveHTTP1(llm.router, logger: TestEnvironment.quietLogger) { llmBase in
                let environment = TestEnvironment.serverEnvironment(
                    database: database,
                    [
                        "BFF_LLM_BASE_URL": "\(llmBase)/v1", "BFF_LLM_API_KEY": llm.apiKey, "BFF_LLM_MODEL": llm.model,
                        "OTEL_EXPORTER_OTLP_ENDPOINT": collectorBase, "OTEL_BSP_SCHEDULE_DELAY": "100",
                    ].merging(extra) { $1 })
                try await body(environment, collector, llm, learner)
            }
        }
    }

    @Test("export is off without an endpoint, off when disabled, and a gRPC protocol is refused at start naming its variable")
    func configuration() throws {
        #expect(try Telemetry.exportConfigured(.traces, [:]) == false)
        #expect(try Telemetry.exportConfigured(.traces, ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]))
        #expect(try Telemetry.exportConfigured(.traces, ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"]))
        #expect(try Telemetry.exportConfigured(.traces, ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"]) == false)
        #expect(try Telemetry.exportConfigured(.traces, ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"]) == false)
        #expect(throws: ConfigurationError.self) {
            try Telemetry.exportConfigured(.traces, ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"])
        }
        #expect(throws: ConfigurationError.self) {
            try Telemetry.exportConfigured(.traces, ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "zipkin"])
        }
        // Metrics follow the same variables with their own signal's names.
        #expect(try Telemetry.exportConfigured(.metrics, ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]))
        #expect(try Telemetry.exportConfigured(.metrics, ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"]) == false)
        #expect(try Telemetry.exportConfigured(.metrics, ["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://collector:4318/v1/metrics"]))
        #expect(try Telemetry.exportConfigured(.metrics, ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_METRICS_EXPORTER": "none"]) == false)
        #expect(throws: ConfigurationError.self) {
            try Telemetry.exportConfigured(.metrics, ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"])
        }
    }
}
