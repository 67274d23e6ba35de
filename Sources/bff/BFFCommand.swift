import ArgumentParser
import BFF
import BFFPlatform
import Foundation

struct BFFCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bff",
        abstract: "The Mobile BFF: HTTP server, migrations and operator tools.",
        subcommands: [Serve.self, Migrate.self, Auth.self, Jobs.self, Push.self, Version.self])
}

/// Configuration errors, refused migrations and an unreachable database end the process with one line on stderr.
func runReportingFailures(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as ConfigurationError {
        FileHandle.standardError.write(Data("bff: \(error)\n".utf8))
        throw ExitCode(2)
    } catch let error as MigrationError {
        FileHandle.standardError.write(Data("bff: \(error)\n".utf8))
        throw ExitCode(1)
    } catch let error as StartupError {
        FileHandle.standardError.write(Data("bff: \(error)\n".utf8))
        throw ExitCode(1)
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the HTTP server (configured by BFF_* variables).")

    func run() async throws {
        try await runReportingFailures {
            try await Commands.serve(environment: ProcessInfo.processInfo.environment)
        }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending database migrations (BFF_MIGRATIONS_DIR; else migrations/ beside bff, else ./migrations). Needs only BFF_DATABASE_URL.")

    func run() async throws {
        try await runReportingFailures {
            let applied = try await Commands.migrate(environment: ProcessInfo.processInfo.environment)
            print(applied.isEmpty ? "bff: schema is up to date" : "bff: applied migrations \(applied.map(String.init).joined(separator: ", "))")
        }
    }
}

struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the version and the commit it was built from.")

    func run() {
        print("bff \(BuildInfo.version) (\(BuildInfo.commit))")
    }
}

struct Auth: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Operator tools for sessions.", subcommands: [Issue.self, Revoke.self])

    struct Issue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a real token pair signed with the configured keys.")

        enum Format: String, ExpressibleByArgument { case json, accessToken = "access-token" }

        @Option(help: "The user id (UUID).") var user: String
        @Option(help: "The device id the refresh token is bound to.") var device: String
        @Option(parsing: .upToNextOption, help: "Scopes (default: all).") var scope: [String] = []
        @Option(help: "json (the token pair) or access-token (the AppJWT alone).") var format: Format = .json

        func run() async throws {
            guard let userID = UUID(uuidString: user) else { throw ValidationError("--user must be a UUID") }
            try await runReportingFailures {
                let issued = try await Commands.issueToken(
                    environment: ProcessInfo.processInfo.environment, userID: userID, deviceID: device,
                    scopes: scope.isEmpty
                        ? AccessTokens.allScopes
                        : scope.flatMap { $0.split(separator: " ").map(String.init) })
                print(format == .json ? issued.json : issued.accessToken)
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke every session of a user or of a device (suspected leak).")

        @Option(help: "The user id (UUID).") var user: String?
        @Option(help: "The device id.") var device: String?

        func validate() throws {
            guard (user == nil) != (device == nil) else { throw ValidationError("give exactly one of --user or --device") }
            if let user, UUID(uuidString: user) == nil { throw ValidationError("--user must be a UUID") }
        }

        func run() async throws {
            try await runReportingFailures {
                let count = try await Commands.revoke(
                    environment: ProcessInfo.processInfo.environment, userID: user.flatMap(UUID.init(uuidString:)), deviceID: device)
                print("bff: revoked \(count) session(s)")
            }
        }
    }
}

struct Jobs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The job runtime: a worker process, periodic jobs run once, and the dead-letter queue.",
        subcommands: [Work.self, Run.self, List.self, Retry.self, Discard.self])

    struct Work: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run job workers only, no HTTP server, until SIGTERM.")

        func run() async throws {
            try await runReportingFailures {
                try await Commands.jobsWork(environment: ProcessInfo.processInfo.environment)
            }
        }
    }

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run one periodic job once and exit (a Container Apps Job or a Kubernetes CronJob).")
        @Argument(help: "The periodic job (maintenance.purge, …).") var name: String

        func run() async throws {
            try await runReportingFailures {
                try await Commands.jobsRun(environment: ProcessInfo.processInfo.environment, name: name)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the newest jobs as JSON lines (arguments are not shown).")
        @Option(help: "available, running, completed, dead or discarded.") var state: String?
        @Option(help: "The job kind.") var kind: String?
        @Option(help: "At most this many (1-1000).") var limit: Int = 100

        func run() async throws {
            guard (1...1000).contains(limit) else { throw ValidationError("--limit must be 1-1000") }
            try await runReportingFailures {
                let jobs = try await Commands.jobsList(environment: ProcessInfo.processInfo.environment, state: state, kind: kind, limit: limit)
                let encoder = JSONEncoder()
                encoder.keyEncodingStrategy = .convertToSnakeCase
                encoder.dateEncodingStrategy = .iso8601
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                for job in jobs { print(String(decoding: try encoder.encode(job), as: UTF8.self)) }
            }
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Put a dead or discarded job back in the queue, its attempts reset.")
        @Argument(help: "The job id.") var id: Int64

        func run() async throws {
            try await runReportingFailures {
                try await Commands.jobsRetry(environment: ProcessInfo.processInfo.environment, id: id)
                print("bff: job \(id) is queued again")
            }
        }
    }

    struct Discard: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Take a waiting or dead job out of the queue for good.")
        @Argument(help: "The job id.") var id: Int64

        func run() async throws {
            try await runReportingFailures {
                try await Commands.jobsDiscard(environment: ProcessInfo.processInfo.environment, id: id)
                print("bff: job \(id) is discarded")
            }
        }
    }
}

struct Push: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Operator tools for push: the Notification Hubs route's installations.", subcommands: [MirrorInstallations.self])

    struct MirrorInstallations: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "mirror-installations",
            abstract: "Enqueue a hub installation mirror of every device that has a push token (once, after switching BFF_PUSH_ROUTE to notification-hubs).")

        @Option(help: "Devices per transaction (1-50000).") var batchSize: Int = Commands.mirrorBatchSize

        func validate() throws {
            guard (1...50_000).contains(batchSize) else { throw ValidationError("--batch-size must be 1-50000") }
        }

        func run() async throws {
            try await runReportingFailures {
                let count = try await Commands.pushMirrorInstallations(environment: ProcessInfo.processInfo.environment, batchSize: batchSize) { total in
                    // stdout is the answer; the running total goes to stderr.
                    FileHandle.standardError.write(Data("bff: \(total) enqueued so far\n".utf8))
                }
                print("bff: enqueued \(count) installation mirror(s)")
            }
        }
    }
}
