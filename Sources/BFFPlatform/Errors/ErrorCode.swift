import HTTPTypes

/// Every `code` an error answer may carry, with its status: the contract's error vocabulary in one
/// place (`openapi.yaml`, "Errors"; a test holds the two together). Clients switch on these, so a
/// code is never renamed; a new one is added here and to the contract's table.
public enum ErrorCode: String, CaseIterable, Sendable {
    // 400: the request cannot be read, or a protocol value is wrong.
    case badRequest = "bad_request"
    case invalidJSON = "invalid_json"
    case invalidForm = "invalid_form"
    case invalidState = "invalid_state"
    case invalidGrant = "invalid_grant"
    case invalidRedirectURI = "invalid_redirect_uri"
    case invalidLogoutToken = "invalid_logout_token"
    case notAcceptable = "not_acceptable"
    // 401
    case invalidToken = "invalid_token"
    case refreshReused = "refresh_reused"
    case refreshExpired = "refresh_expired"
    case invalidRefreshToken = "invalid_refresh_token"
    case sessionRevoked = "session_revoked"
    case idpRejected = "idp_rejected"
    case webhookUnauthorized = "webhook_unauthorized"
    // 403
    case insufficientScope = "insufficient_scope"
    case originNotAllowed = "origin_not_allowed"
    case planRequired = "plan_required"
    case reauthenticationRequired = "reauthentication_required"
    // 404, 405
    case notFound = "not_found"
    case methodNotAllowed = "method_not_allowed"
    // 409
    case staleUpdate = "stale_update"
    case idempotencyInProgress = "idempotency_in_progress"
    case recallDone = "recall_done"
    case recallCanceled = "recall_canceled"
    case chatEnded = "chat_ended"
    // 413, 415
    case payloadTooLarge = "payload_too_large"
    case unsupportedMediaType = "unsupported_media_type"
    // 422
    case validationFailed = "validation_failed"
    case invalidCursor = "invalid_cursor"
    case idempotencyKeyReused = "idempotency_key_reused"
    case unknownSubject = "unknown_subject"
    case unknownTopic = "unknown_topic"
    case contentFiltered = "content_filtered"
    case invalidReceipt = "invalid_receipt"
    // 426
    case upgradeRequired = "upgrade_required"
    // 429
    case rateLimited = "rate_limited"
    case quotaExceeded = "quota_exceeded"
    // 500
    case `internal` = "internal"
    // 503: a dependency is down.
    case databaseUnavailable = "database_unavailable"
    case idpUnavailable = "idp_unavailable"
    case llmUnavailable = "llm_unavailable"
    case storeUnavailable = "store_unavailable"
    case notReady = "not_ready"
    case maintenance = "maintenance"

    /// The status every answer with this code has.
    public var status: HTTPResponse.Status {
        switch self {
        case .badRequest, .invalidJSON, .invalidForm, .invalidState, .invalidGrant, .invalidRedirectURI, .invalidLogoutToken,
            .notAcceptable:
            .badRequest
        case .invalidToken, .refreshReused, .refreshExpired, .invalidRefreshToken, .sessionRevoked, .idpRejected, .webhookUnauthorized:
            .unauthorized
        case .insufficientScope, .originNotAllowed, .planRequired, .reauthenticationRequired: .forbidden
        case .notFound: .notFound
        case .methodNotAllowed: .methodNotAllowed
        case .staleUpdate, .idempotencyInProgress, .recallDone, .recallCanceled, .chatEnded: .conflict
        case .payloadTooLarge: .contentTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .validationFailed, .invalidCursor, .idempotencyKeyReused, .unknownSubject, .unknownTopic, .contentFiltered, .invalidReceipt:
            .unprocessableContent
        case .upgradeRequired: .init(code: 426, reasonPhrase: "Upgrade Required")
        case .rateLimited, .quotaExceeded: .tooManyRequests
        case .internal: .internalServerError
        case .databaseUnavailable, .idpUnavailable, .llmUnavailable, .storeUnavailable, .notReady, .maintenance: .serviceUnavailable
        }
    }
}
