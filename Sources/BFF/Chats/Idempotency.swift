import Crypto
import Foundation

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

/// An `Idempotency-Key` and the request it came with: the key checked as the contract states, and the
/// hash that tells a retry from the same key sent with another body.
enum IdempotencyRequest {
    /// Refuses a key that is not 1–255 visible ASCII characters.
    static func check(_ key: String?) throws {
        guard let key else { return }
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            throw APIError.validation("Idempotency-Key", "must be 1-255 visible ASCII characters")
        }
    }

    /// SHA-256 of the request's canonical JSON (keys sorted).
    static func hash(_ request: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return Data(SHA256.hash(data: try encoder.encode(request)))
    }
}
