import OpenAPIRuntime
import PostgresNIO

/// What a log line may say about an error. The libraries' own descriptions carry too much: the
/// OpenAPI runtime's `ServerError` prints the request's header fields (`Authorization`, `Cookie`)
/// and the decoded input (a refresh token), and `PSQLError`'s debug description prints the
/// statement's bound values; its plain description says nothing at all.
package enum LoggableError {
    package static func describe(_ error: any Error) -> String {
        switch error {
        case let error as ServerError:
            return "\(error.operationID): \(describe(error.underlyingError))"
        case let error as PostgresTransactionError:
            return error.cause.map { "transaction: \(describe($0))" } ?? "transaction failed"
        case let error as PSQLError:
            // The server's DETAIL (which quotes row values) and the query are left out.
            var parts = ["PSQLError \(error.code)"]
            if let state = error.serverInfo?[.sqlState] { parts.append("SQLSTATE \(state)") }
            if let message = error.serverInfo?[.message] { parts.append(message) }
            if let underlying = error.underlying { parts.append(describe(underlying)) }
            return parts.joined(separator: ": ")
        default:
            return "\(type(of: error)): \(error)"
        }
    }
}
