import ArgumentParser
import BFF
import Foundation

@main
struct BFFCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bff",
        abstract: "The Mobile BFF: HTTP server, migrations and operator tools.",
        subcommands: [Serve.self, Migrate.self, Version.self])
}

/// Configuration errors and refused migrations end the process with one line on stderr.
func runReportingFailures(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as ConfigurationError {
        FileHandle.standardError.write(Data("bff: \(error)\n".utf8))
        throw ExitCode(2)
    } catch let error as MigrationError {
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
    static let configuration = CommandConfiguration(abstract: "Apply pending database migrations from BFF_MIGRATIONS_DIR.")

    func run() async throws {
        try await runReportingFailures {
            let applied = try await Commands.migrate(environment: ProcessInfo.processInfo.environment)
            print(applied.isEmpty ? "bff: schema is up to date" : "bff: applied migrations \(applied.map(String.init).joined(separator: ", "))")
        }
    }
}

struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the version.")

    func run() {
        print("bff \(Commands.version)")
    }
}
