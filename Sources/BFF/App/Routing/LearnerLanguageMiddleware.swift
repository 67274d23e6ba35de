import BFFPlatform
import Hummingbird

/// The language of a request that named none of ours in `Accept-Language`: the learner's setting,
/// once authentication knows the learner; from this replica's cache when it has it, else read only
/// when something below asks (`AppRequestContext.answerLanguage()`) or an error is to be worded.
/// An answer whose language is known names it in `Content-Language`; an error thrown above this
/// step is worded by `ErrorMiddleware` in the requested language or the default.
struct LearnerLanguageMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let languages: LearnerLanguages

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        var known: Language? = context.requestedLanguage
        if known == nil, case .authenticated(let principal) = context.authentication {
            if let cached = languages.cached(principal.userID) {
                context.language = cached
                known = cached
            } else {
                context.pendingLanguage = PendingLearnerLanguage(userID: principal.userID, languages: languages)
            }
        } else if known == nil {
            known = context.language
        }
        var response: Response
        do {
            response = try await next(request, context)
        } catch {
            context.language = await context.errorLanguage(for: error)
            response = ErrorMiddleware.response(for: error, context: context)
            known = context.language
        }
        if let language = known ?? context.pendingLanguage?.known, response.headers[.contentLanguage] == nil {
            response.headers[.contentLanguage] = language.rawValue
        }
        return response
    }
}
