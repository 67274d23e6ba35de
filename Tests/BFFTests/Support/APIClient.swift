import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
@testable import BFF

/// A signed-in learner for HTTP tests: a real token pair made by `bff auth issue`'s code path.
struct Learner: Sendable {
    let id: UUID
    let accessToken: String

    static func make(database: DatabaseURL, scopes: [String] = AccessTokens.allScopes) async throws -> Learner {
        let id = UUID()
        let pair = try await Commands.issueToken(
            environment: TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"]),
            userID: id, deviceID: "device-\(id.uuidString.prefix(8))", scopes: scopes)
        return Learner(id: id, accessToken: pair.accessToken)
    }

    var headers: HTTPFields { [.authorization: "Bearer \(accessToken)", .contentType: "application/json"] }
}

extension TestClientProtocol {
    /// Sends `json` (a JSON text) as `learner`.
    func call(_ method: HTTPRequest.Method, _ uri: String, as learner: Learner, json: String? = nil,
              headers extra: HTTPFields = [:]) async throws -> TestResponse {
        var headers = learner.headers
        headers.append(contentsOf: extra)
        return try await execute(uri: uri, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) })
    }
}
