import Foundation
import HTTPTypes
import Hummingbird
import OpenAPIRuntime
import PostgresNIO

/// Turns anything thrown while handling a request into the contract's `{code, message}` error.
/// Anything unrecognised is a 500 whose body reveals nothing; the caller logs the detail.
package enum ErrorMapping {
    package static func apiError(for error: any Error) -> APIError? {
        switch error {
        case let error as APIError:
            return error
        case let error as any DomainError:
            return error.apiError
        case let error as ServerError:
            // The URI decoder's coding path leaves out the parameter's own name; on a method without
            // a body the value that failed is one of the query's (path parameters are strings here).
            if let decoding = error.underlyingError as? DecodingError, error.operationInput == nil,
                [.get, .delete, .head].contains(error.request.method)
            {
                return fromDecoding(decoding, root: "query parameter")
            }
            if let mapped = apiError(for: error.underlyingError) { return mapped }
            return fromOpenAPIRuntime(error)
        case let error as DecodingError:
            return fromDecoding(error)
        case let error as HTTPError:
            return fromHTTPError(error)
        case is DatabaseUnavailable:
            return .databaseUnavailable
        case let error as PSQLError where error.serverInfo?[.sqlState] == "22021":
            // character_not_in_repertoire: PostgreSQL stores no NUL character in text, and any
            // client string reaching a bound parameter may carry one (JSON's \u0000, %00).
            return .validation("text", .noNULCharacters)
        case let error as PSQLError
        where error.serverInfo?[.sqlState] == "23503"
            && error.serverInfo?[.constraintName]?.hasSuffix("_user_id_fkey") == true:
            // A write for an account deleted while its access token still runs (tokens are verified
            // without the database): the token's subject is gone, as after a revocation. Every
            // reference to users is a column constraint `user_id … REFERENCES users`, named so by
            // PostgreSQL; references to a chat are named `…_chat_fkey` and mean a 404 elsewhere.
            return .invalidToken(.accountGone)
        default:
            return nil
        }
    }

    /// Request → Input conversion failures raised by the generated code (internal `RuntimeError`s):
    /// they expose only a status and a description naming the parameter.
    private static func fromOpenAPIRuntime(_ error: ServerError) -> APIError? {
        guard error.operationInput == nil else { return nil }
        // A query string or form body with a pair that has no `=` (`?limit&cursor=…`, `a&b`).
        if LibraryErrors.isURIParsingError(error.underlyingError) {
            if error.request.headerFields[.contentType]?.hasPrefix("application/x-www-form-urlencoded") == true {
                return APIError(.invalidForm, .formFieldWithoutValue)
            }
            return APIError(.validationFailed, .queryParameterWithoutValue)
        }
        guard let convertible = error.underlyingError as? any HTTPResponseConvertible else { return nil }
        switch convertible.httpStatus {
        case .unsupportedMediaType:
            return APIError(.unsupportedMediaType)
        case .badRequest where error.causeDescription.contains("request body"):
            return APIError(.invalidJSON, .jsonBodyRequired)
        case .badRequest, .unprocessableContent:
            return APIError(.validationFailed, .requestOutsideContract(detail: error.causeDescription))
        case .notAcceptable:
            return APIError.notAcceptable
        default:
            return nil
        }
    }

    private static func fromDecoding(_ error: DecodingError, root: String = "body") -> APIError {
        switch error {
        case .dataCorrupted(let context) where context.codingPath.isEmpty && root == "body":
            return APIError(.invalidJSON)
        case .dataCorrupted(let context):
            return .validation(path(context.codingPath, root: root), .invalidValue)
        case .keyNotFound(let key, let context):
            return .validation(path(context.codingPath + [key], root: root), .required)
        case .typeMismatch(let type, let context):
            return .validation(path(context.codingPath, root: root), .mustBeOfType(describe(type)))
        case .valueNotFound(let type, let context):
            return .validation(path(context.codingPath, root: root), .mustBeNonNull(describe(type)))
        @unknown default:
            return .validation("body", .undecodable)
        }
    }

    private static func fromHTTPError(_ error: HTTPError) -> APIError {
        switch error.status {
        case .notFound:
            return .notFound
        case .contentTooLarge:
            return APIError(.payloadTooLarge)
        case .unsupportedMediaType:
            return APIError(.unsupportedMediaType)
        case .badRequest:
            return APIError(.badRequest)
        case .methodNotAllowed:
            return APIError(.methodNotAllowed)
        default:
            // A status the framework chose that the contract has no code of (none is known to
            // occur): kept, with the vocabulary's generic code of its class.
            return APIError(error.status.code < 500 ? .badRequest : .internal, status: error.status)
        }
    }

    private static func path(_ codingPath: [any CodingKey], root: String) -> String {
        let parts = codingPath.map { key in key.intValue.map { "[\($0)]" } ?? key.stringValue }
        let joined = parts.reduce(into: "") { result, part in
            result += part.hasPrefix("[") || result.isEmpty ? part : ".\(part)"
        }
        return joined.isEmpty ? root : joined
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "string"
        case is Int.Type, is Int32.Type, is Int64.Type: "integer"
        case is Double.Type, is Float.Type: "number"
        case is Bool.Type: "boolean"
        default: "\(type)".lowercased()
        }
    }
}
