import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

/// A `bff` process of the build under test, logging to a file of its own.
final class BFFProcess: Sendable {
    let process: Process
    let port: Int
    let log: URL

    init(_ arguments: [String], environment: [String: String], port: Int = 0) throws {
        let binary = TestEnvironment.repository.appendingPathComponent(".build/debug/bff").path
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build bff first (scripts/test does)")
        log = FileManager.default.temporaryDirectory.appendingPathComponent("bff-process-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        self.port = port
        process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.environment = environment.merging(["BFF_HTTP_PORT": String(port), "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin"]) { $1 }
        process.standardOutput = try FileHandle(forWritingTo: log)
        process.standardError = process.standardOutput
        try process.run()
    }

    var base: String { "http://127.0.0.1:\(port)" }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

extension BFFProcess {
    static func freePort() async throws -> Int {
        let probe = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(probe.localAddress?.port)
        try await probe.close()
        return port
    }

    static func send(
        _ method: HTTPMethod, _ url: String, token: String? = nil, json: String? = nil, headers: [(String, String)] = []
    ) async throws -> (status: UInt, body: [String: Any]) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        request.headers.add(contentsOf: headers)
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        return (response.status.code, (try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any]) ?? [:])
    }

    /// Whether `/readyz` answers 200 within 30 seconds (the start-up of a process under a loaded test run).
    func becomesReady() async throws -> Bool {
        try await eventually(within: .seconds(30), every: .milliseconds(100)) {
            (try? await Self.send(.GET, "\(base)/readyz"))?.status == 200
        }
    }

    /// The JSON lines the process has logged so far.
    func logLines() -> [[String: Any]] {
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }
}
