/// Why a request carrying an `Idempotency-Key` cannot be answered from the key's record.
enum IdempotencyError: DomainError, Equatable {
    /// The key was used with another request body.
    case keyReused
    /// The first request with the key is still running.
    case inProgress

    var apiError: APIError {
        switch self {
        case .keyReused: APIError(.idempotencyKeyReused, "This Idempotency-Key was used with a different request body.")
        case .inProgress: APIError(.idempotencyInProgress)
        }
    }
}
