import HTTPTypes
import Hummingbird

private let unescapedHeaderNames: [HTTPField.Name] = [.location, .cacheControl, .eTag]

/// The generated server writes header values URI-escaped ("%2Fapi%2Fv1…", "max-age%3D60"), which is
/// not a usable `Location` or `Cache-Control`; the values of these headers are plain text, so the
/// escaping is undone here.
package struct UnescapedHeadersMiddleware<Context: PlatformRequestContext>: RouterMiddleware {
    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        for name in unescapedHeaderNames {
            if let value = response.headers[name], value.contains("%"), let decoded = value.removingPercentEncoding {
                response.headers[name] = decoded
            }
        }
        return response
    }
}
