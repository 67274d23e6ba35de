import AsyncHTTPClient
import BFFPlatform
import Foundation
import Metrics
import NIOCore
import NIOHTTP1

/// Why a RevenueCat call failed, as the callers answer it.
enum RevenueCatFailure: Error, Equatable, CustomStringConvertible {
    /// RevenueCat (or the store behind it) refused the receipt: 422 `invalid_receipt`.
    case refused(String)
    /// Unreachable, timed out, failing, rate limiting or answering garbage: 503 `store_unavailable`,
    /// a job's retry (after `retryAfter` when it said).
    case unavailable(String, retryAfter: Duration?)
    /// RevenueCat refused our key or the path: 503 too, and an operator must act (logged as an error).
    case misconfigured(String)

    var description: String {
        switch self {
        case .refused(let reason): "refused: \(reason)"
        case .unavailable(let reason, _): "unavailable: \(reason)"
        case .misconfigured(let reason): "misconfigured: \(reason)"
        }
    }

    var kind: String {
        switch self {
        case .refused: "refused"
        case .unavailable: "unavailable"
        case .misconfigured: "misconfigured"
        }
    }
}

/// RevenueCat's REST API v1 over async-http-client: `POST /receipts` to hand it a purchase, and
/// `GET /subscribers/{app_user_id}` for the customer's canonical state. Receipts and the key never
/// reach a log or an error.
struct RevenueCatClient: Sendable {
    let baseURL: String
    let apiKey: String
    let http: HTTPClient
    /// The longest one call may take, connection included.
    let timeout: Duration

    init(baseURL: String, apiKey: String, extraCAFile: String?, timeout: Duration = .seconds(10)) throws {
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.timeout = timeout
        self.http = try OutboundHTTP.client(extraCAFile: extraCAFile)
    }

    /// Hands RevenueCat a store receipt (iOS) or purchase token (Android) for `appUserID`; its answer's
    /// body is not used (the state is read from `subscriber` after).
    func postReceipt(appUserID: String, platform: String, fetchToken: String, productID: String) async throws(RevenueCatFailure) {
        var request = HTTPClientRequest(url: "\(baseURL)/receipts")
        request.method = .POST
        request.headers.add(name: "X-Platform", value: platform)
        request.headers.add(name: "Content-Type", value: "application/json")
        let body: [String: String] = ["app_user_id": appUserID, "fetch_token": fetchToken, "product_id": productID]
        request.body = .bytes(ByteBuffer(bytes: (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data()))
        let (status, headers, text) = try await send(request, operation: "receipts")
        guard (200..<300).contains(status) else { throw Self.failure(status: status, headers: headers, body: text, receipt: true) }
    }

    /// The customer's canonical state.
    func subscriber(appUserID: String) async throws(RevenueCatFailure) -> SubscriberSnapshot {
        let (status, headers, text) = try await send(
            HTTPClientRequest(url: "\(baseURL)/subscribers/\(Self.pathSegment(appUserID))"), operation: "subscribers")
        guard (200..<300).contains(status) else { throw Self.failure(status: status, headers: headers, body: text, receipt: false) }
        guard let snapshot = SubscriberSnapshot(json: text) else {
            Counter(label: "bff_revenuecat_requests_total", dimensions: [("operation", "subscribers"), ("outcome", "garbage")]).increment()
            throw .unavailable("an answer that is no subscriber object", retryAfter: nil)
        }
        return snapshot
    }

    /// Removes the customer and their purchase history at RevenueCat (account deletion); a customer
    /// RevenueCat does not know is already gone.
    func deleteSubscriber(appUserID: String) async throws(RevenueCatFailure) {
        var request = HTTPClientRequest(url: "\(baseURL)/subscribers/\(Self.pathSegment(appUserID))")
        request.method = .DELETE
        let (status, headers, text) = try await send(request, operation: "delete_subscriber")
        guard (200..<300).contains(status) || status == 404 else { throw Self.failure(status: status, headers: headers, body: text, receipt: false) }
    }

    private static func pathSegment(_ id: String) -> String {
        id.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? id
    }

    private func send(_ request: HTTPClientRequest, operation: String) async throws(RevenueCatFailure) -> (Int, HTTPHeaders, Data) {
        var request = request
        request.headers.add(name: "Authorization", value: "Bearer \(apiKey)")
        request.headers.add(name: "Accept", value: "application/json")
        let started = ContinuousClock.now
        do {
            let response = try await http.execute(request, deadline: .now() + .nanoseconds(timeout.nanoseconds), span: "revenuecat \(operation)")
            let body = try await response.body.collect(upTo: 1 << 20)
            let status = Int(response.status.code)
            Metrics.Timer(label: "bff_revenuecat_seconds", dimensions: [("operation", operation)])
                .recordNanoseconds((ContinuousClock.now - started).nanoseconds)
            Counter(label: "bff_revenuecat_requests_total", dimensions: [("operation", operation), ("outcome", String(status))]).increment()
            return (status, response.headers, Data(buffer: body))
        } catch {
            Counter(label: "bff_revenuecat_requests_total", dimensions: [("operation", operation), ("outcome", "unreachable")]).increment()
            if error is CancellationError { throw .unavailable("cancelled", retryAfter: nil) }
            // Refused or reset connections, TLS, timeouts, a body over 1 MiB: RevenueCat is out of reach.
            throw .unavailable(LoggableError.describe(error), retryAfter: nil)
        }
    }

    /// A refusal: RevenueCat's errors are `{code, message}` with its own numeric codes.
    static func failure(status: Int, headers: HTTPHeaders, body: Data, receipt: Bool) -> RevenueCatFailure {
        let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        let code = object?["code"].map { "\($0)" } ?? ""
        let message = String(((object?["message"] as? String) ?? "no error message").prefix(300))
        let described = "HTTP \(status)\(code.isEmpty ? "" : " code \(code)"): \(message)"
        switch status {
        case 408, 409, 423, 429, 500...599:
            return .unavailable(described, retryAfter: RetryAfter.parse(headers))
        case 401, 403, 404, 405:
            return .misconfigured(described)
        case 400..<500 where receipt:
            return .refused(described)
        default:
            return .unavailable(described, retryAfter: nil)
        }
    }
}
