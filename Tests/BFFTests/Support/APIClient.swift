import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import Testing

@testable import BFF
@testable import BFFPlatform

/// A signed-in learner for HTTP tests: a real token pair made by `bff auth issue`'s code path.
struct Learner: Sendable {
    let id: UUID
    let accessToken: String
    var deviceID: String { "device-\(id.uuidString.prefix(8))" }

    static func make(database: DatabaseURL, scopes: [String] = AccessTokens.allScopes) async throws -> Learner {
        let id = UUID()
        let pair = try await Commands.issueToken(
            environment: TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"]),
            userID: id, deviceID: "device-\(id.uuidString.prefix(8))", scopes: scopes)
        return Learner(id: id, accessToken: pair.accessToken)
    }

    var headers: HTTPFields { [.authorization: "Bearer \(accessToken)", .contentType: "application/json"] }

    /// `method path` as this learner over a connection of its own (async-http-client), for requests
    /// sent beside another that is still running; answers the status.
    func send(_ method: HTTPMethod, port: Int, _ path: String, json: String? = nil, timeout: TimeAmount = .seconds(20)) async throws -> UInt {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(accessToken)")
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        return try await HTTPClient.shared.execute(request, timeout: timeout).status.code
    }
}

extension TestClientProtocol {
    /// Sends `json` (a JSON text) as `learner`.
    func call(
        _ method: HTTPRequest.Method, _ uri: String, as learner: Learner, json: String? = nil,
        headers extra: HTTPFields = [:]
    ) async throws -> TestResponse {
        var headers = learner.headers
        headers.append(contentsOf: extra)
        return try await execute(uri: uri, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) })
    }
}

extension TestClientProtocol {
    /// `GET /api/v1/me` with `accessToken`.
    func me(_ accessToken: String) async throws -> TestResponse {
        try await execute(uri: "/api/v1/me", method: .get, headers: [.authorization: "Bearer \(accessToken)"])
    }

    /// Seconds until `GET /api/v1/me` refuses `accessToken` (401), asking every 100 ms; nil when it
    /// is still accepted after `limit`.
    func secondsUntilRefused(_ accessToken: String, limit: Duration = .seconds(5)) async throws -> Double? {
        let clock = ContinuousClock()
        let start = clock.now
        while clock.now - start < limit {
            let me = try await me(accessToken)
            if me.status == .unauthorized {
                #expect(me.errorCode == "invalid_token")
                return (clock.now - start).seconds
            }
            #expect(me.status == .ok)
            try await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }
}
