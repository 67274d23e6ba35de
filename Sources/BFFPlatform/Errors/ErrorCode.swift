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

    /// The message an answer carries when its thrower has nothing more specific to say.
    public var defaultMessage: String {
        switch self {
        case .badRequest: "The request is malformed."
        case .invalidJSON: "The request body is not valid JSON."
        case .invalidForm: "The form body is malformed."
        case .invalidState: "The login is unknown, expired or already used; start again."
        case .invalidGrant: "The code_verifier does not match this login; start again."
        case .invalidRedirectURI: "redirect_uri is not registered for this app."
        case .invalidLogoutToken: "The logout token is not valid."
        case .notAcceptable: "This API answers application/json only; accept application/json or */*."
        case .invalidToken: "The access token is missing, expired or invalid."
        case .refreshReused: "The refresh token was already used; the session was revoked for safety."
        case .refreshExpired: "The refresh token has expired; sign in again."
        case .invalidRefreshToken: "The refresh token is not valid."
        case .sessionRevoked: "This session was revoked; sign in again."
        case .idpRejected: "The identity provider did not accept the login."
        case .webhookUnauthorized: "The Authorization header is not the one configured for this webhook."
        case .insufficientScope: "The access token lacks the scope this operation needs."
        case .originNotAllowed: "A request authenticated by the session cookie must come from an allowed origin."
        case .planRequired: "This feature needs a higher plan."
        case .reauthenticationRequired: "This needs a recent sign-in; sign in again and retry."
        case .notFound: "The requested resource does not exist."
        case .methodNotAllowed: "This path does not accept this method."
        case .staleUpdate: "The resource was changed after your copy; reload it and retry."
        case .idempotencyInProgress: "A request with this Idempotency-Key is still being processed; retry."
        case .recallDone: "This recall was already evaluated."
        case .recallCanceled: "This recall was canceled: its chat was deleted."
        case .chatEnded: "This chat has ended; start a new one."
        case .payloadTooLarge: "The request body is larger than allowed."
        case .unsupportedMediaType: "Send the body as application/json."
        case .validationFailed: "The request does not match the contract."
        case .invalidCursor: "cursor is not a cursor of this list and its filters."
        case .idempotencyKeyReused: "This Idempotency-Key was used with another request body."
        case .unknownSubject: "No such subject."
        case .unknownTopic: "No such topic."
        case .contentFiltered: "The tutor cannot answer this message. Please rephrase it."
        case .invalidReceipt: "The store did not accept this receipt."
        case .upgradeRequired: "This version of the app is no longer supported; update it from the store."
        case .rateLimited: "Too many requests; retry later."
        case .quotaExceeded: "Your plan's quota for today is used up."
        case .internal: "An internal error occurred; it has been logged with the request id."
        case .databaseUnavailable: "The database is unavailable; retry shortly."
        case .idpUnavailable: "The identity provider is unavailable; retry shortly."
        case .llmUnavailable: "The tutor is unavailable; retry shortly."
        case .storeUnavailable: "The app store is unavailable; retry shortly."
        case .notReady: "The service is not ready."
        case .maintenance: "The service is under maintenance; please try again later."
        }
    }
}
