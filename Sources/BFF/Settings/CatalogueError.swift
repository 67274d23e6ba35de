import BFFPlatform

/// A subject or topic the catalogue does not hold, named by the request field that referred to it.
enum CatalogueError: DomainError, Equatable {
    case unknownSubject(field: String)
    case unknownTopic(field: String, problem: String)

    var apiError: APIError {
        switch self {
        case .unknownSubject(let field): APIError(.unknownSubject, "\(field): no such subject.")
        case .unknownTopic(let field, let problem): APIError(.unknownTopic, "\(field): \(problem)")
        }
    }
}
