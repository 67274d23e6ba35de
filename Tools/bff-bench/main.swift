// bff-bench: the load and micro benchmarks behind scripts/bench (Benchmarks/README.md).
//
//   bff-bench jwt     [--iterations N] [--rounds R] [--budget S] [--key kid:base64url]
//   bff-bench pairs   --count N --out FILE [--users U] [--concurrency C]      (BFF_* environment)
//   bff-bench tokens  --users FILE --out FILE [--lifetime S]                   (BFF_* environment)
//   bff-bench jobs    --database URL [--count N] [--enqueuers E] [--concurrency C]
//   bff-bench push    --database URL --deliveries FILE [--users U] [--recalls N] [--devices 1|2] [--spread S] [--start-in S] [--timeout S]
//                     [--route direct|notification-hubs]
//   bff-bench register --server URL --database URL [--count N]                (BFF_* environment)
//   bff-bench chat    --server URL --database URL --timings FILE --server-pid P [--turns N] [--json N] [--open N]  (BFF_* environment)
//   bff-bench iap     --server URL --database URL --revenuecat URL [--users U] [--events N] [--duplicates D] [--concurrency C] [--timeout S]
//                     (BFF_REVENUECAT_WEBHOOK_AUTH, BFF_IAP_PRODUCTS)
//
// Human-readable lines go to stdout; every figure scripts/bench uses is also printed as one
// `RESULT name=value` line.
import BFF
import BFFJobs
import BFFPlatform
import BFFWire
import EventLoopExecutor
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOPosix
import PostgresNIO

// MARK: - Small helpers

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// `--name value` pairs after the subcommand.
struct Options {
    private var values: [String: String] = [:]

    init(_ arguments: ArraySlice<String>) throws {
        var rest = arguments
        while let name = rest.popFirst() {
            guard name.hasPrefix("--"), let value = rest.popFirst() else { throw Failure("expected --option value, got '\(name)'") }
            values[String(name.dropFirst(2))] = value
        }
    }

    func string(_ name: String) throws -> String {
        guard let value = values[name] else { throw Failure("--\(name) is required") }
        return value
    }

    func string(_ name: String, default fallback: String) -> String { values[name] ?? fallback }

    func int(_ name: String, default fallback: Int, allowZero: Bool = false) throws -> Int {
        guard let text = values[name] else { return fallback }
        guard let value = Int(text), value > 0 || (allowZero && value == 0) else {
            throw Failure("--\(name) must be a \(allowZero ? "non-negative" : "positive") integer, got '\(text)'")
        }
        return value
    }
}

func result(_ name: String, _ value: Double) {
    print("RESULT \(name)=\(String(format: "%.3f", value))")
}

func result(_ name: String, _ value: Int) {
    print("RESULT \(name)=\(value)")
}

func format(_ value: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", value) }

func nanoseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9
}

func seconds(_ duration: Duration) -> Double { nanoseconds(duration) / 1e9 }

/// The database and job runtime's own logging, quiet: only errors.
func benchLogger() -> Logger {
    var logger = Logger(label: "bff-bench")
    logger.logLevel = .error
    return logger
}

func randomBase64URL(bytes: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    return Base64URL.encode((0..<bytes).map { _ in UInt8.random(in: 0...255, using: &generator) })
}

func writeLines(_ lines: [String], to path: String) throws {
    try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
}

func readLines(_ path: String) throws -> [String] {
    try String(contentsOfFile: path, encoding: .utf8).split(whereSeparator: \.isNewline).map(String.init).filter { !$0.isEmpty }
}

// MARK: - jwt: in-process AppJWT verification

func benchJWT(_ options: Options) async throws {
    let iterations = try options.int("iterations", default: 200_000)
    let rounds = try options.int("rounds", default: 3)
    let budget = try options.int("budget", default: 15)
    let keyText = options.string("key", default: "k1:\(randomBase64URL(bytes: 32))")
    let tokens = AccessTokens(keyRing: try JWTKeyRing(parsing: keyText), issuer: "bff", audience: "mobile", lifetime: .seconds(900))
    let clock = ContinuousClock()

    let token = tokens.issue(
        userID: UUID(), deviceID: "bench-device-jwt", familyID: UUID(), scopes: ["chat:rw", "profile:read"],
        tokenID: randomBase64URL(bytes: 16), issuedAt: Date())
    let principal = try tokens.verify(token)
    guard principal.scopes == ["chat:rw", "profile:read"], let familyID = principal.familyID else {
        throw Failure("the issued token does not verify to its own claims")
    }
    print("token: \(token.utf8.count) bytes, HS256, kid k1")

    // Warm-up: caches, lazy initialisation, CPU frequency.
    var sink = 0
    for _ in 0..<max(10_000, iterations / 10) {
        sink &+= try tokens.verify(token).tokenID.utf8.count
    }

    // Sequential verifications, as the auth middleware does one per request. Rounds stop once
    // `budget` seconds are spent, so a slow verifier keeps the phase bounded.
    var perRound: [Double] = []
    let phaseStart = clock.now
    for round in 1...rounds {
        let start = clock.now
        for _ in 0..<iterations {
            sink &+= try tokens.verify(token).tokenID.utf8.count
        }
        let ns = nanoseconds(clock.now - start) / Double(iterations)
        perRound.append(ns)
        print("round \(round): \(iterations) verifications, \(format(ns)) ns each")
        if round < rounds, clock.now - phaseStart > .seconds(budget) {
            print("(stopping after \(round) round(s): the \(budget) s budget is spent)")
            break
        }
    }
    let sorted = perRound.sorted()
    let median = sorted[sorted.count / 2]
    print("verify: median \(format(median)) ns, best \(format(sorted[0])) ns per verification (\(format(1e9 / median, 0))/s on one task)")

    // Signing, for comparison (once per login/refresh, not per request).
    let issueCount = max(1_000, iterations / 10)
    let issueStart = clock.now
    let issuedAt = Date()
    for index in 0..<issueCount {
        sink &+=
            tokens.issue(
                userID: principal.userID, deviceID: "bench-device-jwt", familyID: familyID,
                scopes: ["chat:rw", "profile:read"], tokenID: "jti-\(index)", issuedAt: issuedAt
            ).utf8.count
    }
    let issueNs = nanoseconds(clock.now - issueStart) / Double(issueCount)
    print("issue: \(format(issueNs)) ns per token")

    // Two concurrent tasks (the machine has two cores): total verifications per second.
    let perTask = max(1, iterations / 2)
    let parallelStart = clock.now
    let counted = try await withThrowingTaskGroup(of: Int.self) { group in
        for _ in 0..<2 {
            group.addTask {
                var local = 0
                for _ in 0..<perTask { local &+= try tokens.verify(token).tokenID.utf8.count }
                return local
            }
        }
        return try await group.reduce(0, &+)
    }
    sink &+= counted
    let parallelRate = Double(2 * perTask) / (nanoseconds(clock.now - parallelStart) / 1e9)
    print("verify on 2 concurrent tasks: \(format(parallelRate, 0)) verifications/s in total")
    if sink == 42 { print("") }  // keeps the optimiser from dropping the loops

    result("jwt_verify_ns", median)
    result("jwt_verify_best_ns", sorted[0])
    result("jwt_issue_ns", issueNs)
    result("jwt_verify_per_s_2tasks", parallelRate)
}

// MARK: - pairs: refresh-token families for the refresh benchmark

func benchPairs(_ options: Options) async throws {
    let count = try options.int("count", default: 2_000)
    let userCount = try options.int("users", default: 100)
    let concurrency = try options.int("concurrency", default: 8)
    let out = try options.string("out")
    let environment = ProcessInfo.processInfo.environment
    let users = (0..<userCount).map { _ in UUID() }
    let clock = ContinuousClock()
    let start = clock.now

    let targets = (0..<count).map { index in (userID: users[index % users.count], deviceID: "bench-device-\(index)") }
    let pairs = try await Commands.issueTokens(
        environment: environment, for: targets, scopes: AccessTokens.allScopes, concurrency: concurrency)
    let lines = zip(targets, pairs).map { target, pair in
        "\(target.userID.uuidString.lowercased()) \(target.deviceID) \(pair.refreshToken)"
    }
    try writeLines(lines, to: out)
    let seconds = nanoseconds(clock.now - start) / 1e9
    print("pairs: \(count) families for \(userCount) users in \(format(seconds, 1)) s (\(format(seconds * 1000 / Double(count), 2)) ms each) -> \(out)")
}

// MARK: - tokens: one AppJWT per seeded user for the list benchmark

func benchTokens(_ options: Options) async throws {
    let users = try readLines(try options.string("users")).map { line -> UUID in
        guard let id = UUID(uuidString: line.trimmingCharacters(in: .whitespaces)) else { throw Failure("users file: not a UUID: \(line)") }
        return id
    }
    let out = try options.string("out")
    let lifetime = try options.int("lifetime", default: 3600)
    // The server's own keys, issuer and audience.
    let configuration = try TokenConfiguration(environment: ProcessInfo.processInfo.environment)
    let tokens = AccessTokens(
        keyRing: configuration.jwtKeys, issuer: configuration.jwtIssuer, audience: configuration.jwtAudience, lifetime: .seconds(lifetime))
    let now = Date()
    var lines: [String] = []
    lines.reserveCapacity(users.count)
    for (index, user) in users.enumerated() {
        lines.append(
            tokens.issue(
                userID: user, deviceID: "bench-device-list-\(index)", familyID: UUID(), scopes: ["chat:rw", "profile:read"],
                tokenID: randomBase64URL(bytes: 16), issuedAt: now))
    }
    try writeLines(lines, to: out)
    print("tokens: \(lines.count) access tokens (\(lifetime) s) -> \(out)")
}

// MARK: - jobs

/// The bare job runtime: `count` no-op jobs enqueued one per transaction by `enqueuers` tasks (on
/// as many connections, plus 8 for the worker) while
/// one worker (`concurrency` at once) claims and completes them; jobs per second from the first
/// enqueue to the last completion. scripts/bench sets it beside pgbench's one-row update.
func benchJobs(_ options: Options) async throws {
    let count = try options.int("count", default: 20_000)
    // As many producers, each on a connection of its own, as pgbench's clients (scripts/bench: 32).
    let enqueuers = try options.int("enqueuers", default: 32)
    let concurrency = try options.int("concurrency", default: 64)
    let url = try DatabaseURL(parsing: try options.string("database"))
    let logger = benchLogger()
    let database = Database(configuration: url, perEventLoopOf: .singleton, timeout: .seconds(30), poolSize: enqueuers + 8, logger: logger)
    let done = NIOLockedValueBox(0)
    let finished = AsyncStream<Void>.makeStream()
    let kind = "bench.noop"
    let handler = JobHandler(kind: kind, concurrency: concurrency) { _ in
        let total = done.withLockedValue { value -> Int in
            value += 1
            return value
        }
        if total == count { finished.continuation.finish() }
    }
    let worker = JobWorker(
        database: database, databaseURL: url, handlers: [handler],
        configuration: .init(concurrency: concurrency, pollInterval: .milliseconds(200), lease: .seconds(60), drain: .seconds(5)),
        logger: logger)
    let elapsed = try await Commands.withDatabase(database) { client in
        _ = try await client.query("DELETE FROM jobs WHERE kind = \(kind)")
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await worker.run() }
            let start = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { enqueueing in
                for enqueuer in 0..<enqueuers {
                    enqueueing.addTask {
                        for index in stride(from: enqueuer, to: count, by: enqueuers) {
                            try await client.withConnection { connection in
                                _ = try await JobQueue.enqueue(kind, ["n": index], on: connection, logger: logger)
                            }
                        }
                    }
                }
                try await enqueueing.waitForAll()
            }
            let enqueued = ContinuousClock.now - start
            let ranByThen = done.withLockedValue { $0 }
            for await _ in finished.stream {}
            let elapsed = ContinuousClock.now - start
            worker.stop()
            try await group.waitForAll()
            // Which side bounds the rate: the enqueues, or the worker still running jobs after them.
            print("jobs: all enqueued after \(format(seconds(enqueued), 2)) s, when \(ranByThen) had run")
            return seconds(elapsed)
        }
    }
    print("jobs: \(count) no-op jobs enqueued by \(enqueuers) tasks, run by one worker (\(concurrency) at once) in \(format(elapsed, 2)) s")
    result("jobs_per_second", Double(count) / elapsed)
}

// MARK: - main

let usage = """
    usage: bff-bench jwt     [--iterations N] [--rounds R] [--budget S] [--key kid:base64url]
           bff-bench pairs   --count N --out FILE [--users U] [--concurrency C]
           bff-bench tokens  --users FILE --out FILE [--lifetime S]
           bff-bench jobs    --database URL [--count N] [--enqueuers E] [--concurrency C]
           bff-bench push    --database URL --deliveries FILE [--users U] [--recalls N] [--devices 1|2] [--spread S] [--start-in S] [--timeout S]
                             [--route direct|notification-hubs]
           bff-bench register --server URL --database URL [--count N]
           bff-bench chat    --server URL --database URL --timings FILE --server-pid P [--turns N] [--json N] [--open N]
           bff-bench floor   [--port P]
           bff-bench iap     --server URL --database URL --revenuecat URL [--users U] [--events N] [--duplicates D] [--concurrency C] [--timeout S]
    pairs, tokens and register read the server's BFF_* environment (database, keys), iap its BFF_REVENUECAT_WEBHOOK_AUTH
    and BFF_IAP_PRODUCTS. scripts/bench runs them all.
    """

let arguments = CommandLine.arguments
// The floor server runs on the same executor as `bff serve` (Sources/bff/main.swift), installed
// before anything starts NIO's loops; the load generators keep Swift's own.
if arguments.dropFirst().first == "floor" {
    _ = EventLoopGlobalExecutor.install()
}
do {
    guard arguments.count >= 2 else { throw Failure(usage) }
    let options = try Options(arguments.dropFirst(2))
    switch arguments[1] {
    case "jwt": try await benchJWT(options)
    case "pairs": try await benchPairs(options)
    case "tokens": try await benchTokens(options)
    case "jobs": try await benchJobs(options)
    case "push": try await benchPush(options)
    case "register": try await benchRegister(options)
    case "chat": try await benchChat(options)
    case "iap": try await benchIAP(options)
    case "floor": try await benchFloor(options)
    case "-h", "--help", "help": print(usage)
    default: throw Failure("unknown command '\(arguments[1])'\n\(usage)")
    }
} catch {
    FileHandle.standardError.write(Data("bff-bench: \(error)\n".utf8))
    exit(1)
}
