import AsyncHTTPClient
import Foundation
import Testing

@testable import BFF
@testable import BFFPlatform

/// Each `bff` command reads only the configuration it uses, so each role can be given only its own
/// secrets: the migrate Job its database URL, the worker no IdP client or signing keys.
@Suite("Configuration by command", .needsDatabase, .timeLimit(.minutes(3)))
struct CommandConfigurationTests {
    /// The image's layout, `bff` with `migrations/` beside it, in a folder of its own; the commands
    /// run from another working directory, with only what their role is given.
    private static func installedCopy() throws -> (binary: String, elsewhere: URL) {
        let source = TestEnvironment.repository.appendingPathComponent(".build/debug/bff")
        try #require(FileManager.default.isExecutableFile(atPath: source.path), "build bff first (scripts/test does)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bff-installed-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let binary = folder.appendingPathComponent("bff")
        do {
            try FileManager.default.linkItem(at: source, to: binary)
        } catch {
            try FileManager.default.copyItem(at: source, to: binary)
        }
        try FileManager.default.copyItem(
            at: URL(fileURLWithPath: TestEnvironment.migrationsDirectory), to: folder.appendingPathComponent("migrations"))
        let elsewhere = FileManager.default.temporaryDirectory.appendingPathComponent("bff-cwd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        return (binary.path, elsewhere)
    }

    /// Both folders `installedCopy` made.
    private static func remove(binary: String, elsewhere: URL) {
        try? FileManager.default.removeItem(at: URL(fileURLWithPath: binary).deletingLastPathComponent())
        try? FileManager.default.removeItem(at: elsewhere)
    }

    /// Runs `binary arguments` to its end in `directory` with exactly `environment` (and PATH).
    private static func run(
        _ binary: String, _ arguments: [String], in directory: URL, environment: [String: String]
    ) async throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.environment = environment.merging(["PATH": "/usr/bin:/bin"]) { $1 }
        let output = directory.appendingPathComponent("out-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        let deadline = ContinuousClock.now + .seconds(60)
        while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        try handle.close()
        return (process.terminationStatus, try String(contentsOf: output, encoding: .utf8))
    }

    @Test(
        "migrate, jobs list|run, auth revoke and push mirror-installations need only BFF_DATABASE_URL (the last refuses the direct route); auth issue adds BFF_JWT_KEYS; migrations are found beside bff"
    )
    func operatorCommands() async throws {
        let (binary, elsewhere) = try Self.installedCopy()
        defer { Self.remove(binary: binary, elsewhere: elsewhere) }
        let database = try await TestDatabases.shared.makeEmpty(prefix: "bff_commands")
        let only = ["BFF_DATABASE_URL": database.urlString]

        let migrate = try await Self.run(binary, ["migrate"], in: elsewhere, environment: only)
        #expect(migrate.status == 0, "\(migrate.output)")
        #expect(migrate.output.contains("bff: applied migrations 1, "), "\(migrate.output)")
        let again = try await Self.run(binary, ["migrate"], in: elsewhere, environment: only)
        #expect(again.status == 0 && again.output.contains("schema is up to date"), "\(again.output)")

        let list = try await Self.run(binary, ["jobs", "list", "--state", "dead"], in: elsewhere, environment: only)
        #expect(list.status == 0, "\(list.output)")
        let purge = try await Self.run(binary, ["jobs", "run", MaintenanceJob.kind], in: elsewhere, environment: only)
        #expect(purge.status == 0, "\(purge.output)")
        let revoke = try await Self.run(binary, ["auth", "revoke", "--device", "phone-commands-1"], in: elsewhere, environment: only)
        #expect(revoke.status == 0 && revoke.output.contains("revoked 0 session(s)"), "\(revoke.output)")
        // The hub's backfill reads the route too, and refuses to run on the direct one.
        let mirrorOnDirect = try await Self.run(binary, ["push", "mirror-installations"], in: elsewhere, environment: only)
        #expect(mirrorOnDirect.status == 2 && mirrorOnDirect.output.contains("BFF_PUSH_ROUTE is direct"), "\(mirrorOnDirect.output)")
        let mirror = try await Self.run(
            binary, ["push", "mirror-installations", "--batch-size", "2"], in: elsewhere,
            environment: only.merging(["BFF_PUSH_ROUTE": "notification-hubs"]) { $1 })
        #expect(mirror.status == 0 && mirror.output.contains("bff: enqueued 0 installation mirror(s)"), "\(mirror.output)")

        let user = UUID().uuidString
        let withoutKeys = try await Self.run(binary, ["auth", "issue", "--user", user, "--device", "phone-commands-1"], in: elsewhere, environment: only)
        #expect(withoutKeys.status == 2 && withoutKeys.output.contains("BFF_JWT_KEYS"), "\(withoutKeys.output)")
        let issued = try await Self.run(
            binary, ["auth", "issue", "--user", user, "--device", "phone-commands-1", "--format", "access-token"], in: elsewhere,
            environment: only.merging(["BFF_JWT_KEYS": TestEnvironment.jwtKeys]) { $1 })
        #expect(issued.status == 0 && issued.output.split(separator: ".").count == 3, "\(issued.output)")

        // The server needs its keys and its IdP, and says which is missing.
        let serve = try await Self.run(binary, ["serve"], in: elsewhere, environment: only)
        #expect(serve.status == 2 && serve.output.contains("BFF_JWT_KEYS"), "\(serve.output)")
        let version = try await Self.run(binary, ["version"], in: elsewhere, environment: [:])
        #expect(version.output == "bff \(BuildInfo.version) (\(BuildInfo.commit))\n")
    }

    @Test("without BFF_MIGRATIONS_DIR or a migrations/ beside bff or here, migrate names what is missing")
    func migrationsNowhere() async throws {
        let bare = FileManager.default.temporaryDirectory.appendingPathComponent("bff-bare-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: bare, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: bare) }
        let binary = bare.appendingPathComponent("bff")
        let source = TestEnvironment.repository.appendingPathComponent(".build/debug/bff")
        do { try FileManager.default.linkItem(at: source, to: binary) } catch { try FileManager.default.copyItem(at: source, to: binary) }
        let database = try await TestDatabases.shared.makeEmpty(prefix: "bff_commands")
        let migrate = try await Self.run(binary.path, ["migrate"], in: bare, environment: ["BFF_DATABASE_URL": database.urlString])
        #expect(migrate.status != 0 && migrate.output.contains("migrations"), "\(migrate.output)")
    }

    @Test("jobs work runs on the database alone: features off said once, half a feature refused, its metrics scraped from the admin listener")
    func worker() async throws {
        let (binary, elsewhere) = try Self.installedCopy()
        defer { Self.remove(binary: binary, elsewhere: elsewhere) }
        let database = try await TestDatabases.shared.makeMigrated()
        let only = ["BFF_DATABASE_URL": database.urlString, "BFF_ADMIN_PORT": "0", "BFF_SHUTDOWN_GRACE": "2"]

        let half = try await Self.run(binary, ["jobs", "work"], in: elsewhere, environment: only.merging(["BFF_LLM_MODEL": "gpt-4o"]) { $1 })
        #expect(half.status == 2 && half.output.contains("BFF_LLM_BASE_URL"), "\(half.output)")

        let log = elsewhere.appendingPathComponent("worker.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["jobs", "work"]
        process.currentDirectoryURL = elsewhere
        process.environment = only.merging(["PATH": "/usr/bin:/bin"]) { $1 }
        process.standardOutput = try FileHandle(forWritingTo: log)
        process.standardError = process.standardOutput
        try process.run()
        defer {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
        func lines() -> [[String: Any]] {
            ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }
        var port: Int?
        let deadline = ContinuousClock.now + .seconds(30)
        while port == nil, ContinuousClock.now < deadline, process.isRunning {
            port =
                lines().lazy.compactMap { entry -> Int? in
                    guard entry["msg"] as? String == "admin listener started" else { return nil }
                    return (entry["address"] as? String)?.split(separator: ":").last.flatMap { Int($0) }
                }.first
            if port == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let admin = "http://127.0.0.1:\(try #require(port, "no admin listener: \(lines())"))"
        @Sendable func get(_ path: String) async throws -> (status: UInt, text: String) {
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: admin + path), timeout: .seconds(10))
            return (response.status.code, String(buffer: try await response.body.collect(upTo: 1 << 22)))
        }
        #expect(try await eventually(within: .seconds(20)) { (try? await get("/readyz"))?.status == 200 })
        // The worker's own series: the queue's depth it polls, its readiness, the process.
        #expect(
            try await eventually(within: .seconds(20)) {
                let text = (try? await get("/metrics"))?.text ?? ""
                return text.contains("bff_jobs_queue_depth{") && text.contains("bff_ready 1") && text.contains("process_cpu_seconds_total ")
                    && text.contains("bff_build_info{")
            })
        #expect(try await get("/healthz").text.contains(#""version":"\#(BuildInfo.version)""#))
        let off = lines().compactMap { $0["msg"] as? String }.filter { $0.hasSuffix(" is off") || $0.contains(" is off:") }
        #expect(off.count == 3, "push, the LLM and RevenueCat each said once: \(off)")

        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(lines().suffix(5))")
    }
}
