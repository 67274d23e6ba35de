import NIOPosix
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Database pools", .needsDatabase, .timeLimit(.minutes(3)))
struct DatabasePoolTests {
    @Test("a process opens at most its pool size: with more event loops than connections, the loops beyond take turns at the pools")
    func poolsCappedAtThePoolSize() async throws {
        let url = try await TestDatabases.shared.makeEmpty()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 3)
        do {
            let database = Database(
                configuration: url, perEventLoopOf: group, timeout: .seconds(5), poolSize: 2, logger: TestEnvironment.quietLogger)
            #expect(database.clients.count == 2)
            let loops = Array(group.makeIterator())
            #expect(try await loops[0].submit { database.currentPool }.get() == 0)
            #expect(try await loops[1].submit { database.currentPool }.get() == 1)
            // The third loop, and tasks off the loops, use each pool in turn.
            var turns: [Int] = []
            for _ in 0..<2 { turns.append(try await loops[2].submit { database.currentPool }.get()) }
            for _ in 0..<2 { turns.append(database.currentPool) }
            #expect(Set(turns) == [0, 1])
            // And each pool answers.
            let answers = try await Commands.withDatabase(database) { _ in
                var answers: [Int] = []
                for pool in 0..<2 {
                    answers.append(
                        try await database.run(pool: pool) { client in
                            try await client.query("SELECT 1").collect().count
                        })
                }
                return answers
            }
            #expect(answers == [1, 1])
        } catch {
            try await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }
}
