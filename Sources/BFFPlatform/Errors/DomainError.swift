/// An error of a capability's own (a refresh refused, an unknown subject) that says how the
/// contract answers it. Repositories and services throw these, not HTTP errors; `ErrorMapping`
/// turns them into the answer.
package protocol DomainError: Error {
    var apiError: APIError { get }
}
