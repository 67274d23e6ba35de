/// Library errors that can only be recognised by their type's name: each is internal to its
/// library, so no `as` or `is` can name it. Fully qualified, and held by a test that makes the
/// library throw it (`HTTPContractTests`), so that an upgrade renaming it fails there, not quietly
/// in production.
enum LibraryErrors {
    /// OpenAPIRuntime's URI coder refusing a query string or form body with a pair that has no `=`.
    static func isURIParsingError(_ error: (any Error)?) -> Bool {
        guard let error else { return false }
        return String(reflecting: type(of: error)) == "OpenAPIRuntime.ParsingError"
    }
}
