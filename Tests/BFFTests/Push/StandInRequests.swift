import AsyncHTTPClient
import BFFWire
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import _CryptoExtras

@testable import BFF
@testable import BFFPlatform

/// Requests made by hand to a push stand-in, for the tests of what it refuses: a JWT with any header
/// and claims text, and a POST whose answer is returned whatever its status.
enum StandInRequests {
    struct Answer: Sendable {
        let status: Int
        let body: String

        /// The JSON body's member at `path` (`error.status`), when it is a string.
        func string(_ path: String) -> String? {
            var value: Any? = try? JSONSerialization.jsonObject(with: Data(body.utf8))
            for key in path.split(separator: ".") { value = (value as? [String: Any])?[String(key)] }
            return value as? String
        }
    }

    /// `header` and `claims` exactly as given (so a test can write `"iat":"1795…"`), signed by `sign`.
    static func jwt(header: String, claims: String, sign: (Data) throws -> Data) rethrows -> String {
        let input = "\(Base64URL.encode(Array(header.utf8))).\(Base64URL.encode(Array(claims.utf8)))"
        return "\(input).\(Base64URL.encode(Array(try sign(Data(input.utf8)))))"
    }

    static func rs256(_ key: _RSA.Signing.PrivateKey) -> (Data) throws -> Data {
        { try key.signature(for: $0, padding: .insecurePKCS1v1_5).rawRepresentation }
    }

    static func es256(_ key: P256.Signing.PrivateKey) -> (Data) throws -> Data {
        { try key.signature(for: $0).rawRepresentation }
    }

    static func post(_ url: String, headers: [(String, String)], body: String, http: HTTPClient) async throws -> Answer {
        try await send(.POST, url, headers: headers, body: body, http: http)
    }

    /// `method url` with `headers` and, when given, `body`; the answer whatever its status.
    static func send(_ method: HTTPMethod, _ url: String, headers: [(String, String)], body: String?, http: HTTPClient) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await http.execute(request, timeout: .seconds(20))
        return Answer(status: Int(response.status.code), body: String(buffer: try await response.body.collect(upTo: 1 << 20)))
    }

    static var now: Int64 { Int64(Date().timeIntervalSince1970) }
}
