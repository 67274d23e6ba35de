import Hummingbird

/// The generated server writes header values URI-escaped ("%2Fapi%2Fv1…"), which is not a usable
/// `Location`; our locations are plain paths, so the escaping is undone here.
struct LocationHeaderMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        if let location = response.headers[.location], location.hasPrefix("%2F"), let decoded = location.removingPercentEncoding {
            response.headers[.location] = decoded
        }
        return response
    }
}
