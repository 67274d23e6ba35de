import NIOPosix
import PostgresNIO
import Testing
@testable import BFF

@Suite("Database pools")
struct DatabasePoolTests {
    @Test("a process opens at most its pool size: with more event loops than connections, the loops beyond take turns at the pools")
    func poolsCappedAtThePoolSize() async throws {
        let url = try await TestDatabases.shared.makeEmpty()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 3)
        let database = Database(configuration: url, perEventLoopOf: group, timeout: .seconds(5), poolSize: 2, logger: TestEnvironment.quietLogger)
        #expect(database.clients.count == 2)
        let loops = Array(group.makeIterator())
        #expect(try await loops[0].submit { database.currentPool }.get() == 0)
        #expect(try await loops[1].submit { database.currentPool }.get() == 1)
        // The third loop, and tasks off the loops, use each pool in turn.
        var turns: [Int] = []
        for _ in 0..<2 { turns.append(try await loops[2].submit { database.currentPool }.get()) }
        for _ in 0..<2 { turns.append(database.currentPool) }
        #expect(Set(turns) == [0, 1])
        let backends = try await Commands.withDatabase(database) { client in
            var opened = -1
            let rows = try await client.query("SELECT count(*)::int FROM pg_stat_activity WHERE datname = current_database()")
            for try await count in rows.decode(Int.self) { opened = count }
            return opened
        }
        #expect((1...2).contains(backends))
        try await group.shutdownGracefully()
    }
}
