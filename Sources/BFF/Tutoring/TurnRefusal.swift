import BFFPlatform

/// Why a tutoring turn is not answered: what the learner is told, as the turn decides it (the words
/// and statuses are in `APIService.swift`, beside the turn's handler). The catalogue, the key and the
/// plan refuse with errors of their own (`CatalogueError`, `IdempotencyError`, `PlanRefusal`).
enum TurnRefusal: Error, Equatable {
    /// A request field outside the contract's rules, or one the turn's mode does not take.
    case invalid(field: String, problem: Phrase.Problem)
    /// The chat is not the learner's, or was deleted while the LLM answered.
    case chatNotFound
    /// The chat has ended (before the turn, or while the LLM answered).
    case chatEnded
    /// Too many turns in the per-user window.
    case rateLimited(RateLimiter.Decision)
    /// The LLM cannot answer now (down, overloaded, or refusing our configuration): the app asks again
    /// after `retryAfterSeconds`.
    case tutorUnavailable(retryAfterSeconds: Int)
    /// No LLM is configured on this server (`BFF_LLM_BASE_URL`).
    case tutorNotConfigured(retryAfterSeconds: Int)
    /// The provider's content filter refused the prompt or the reply.
    case contentFiltered
    /// The server reached its drain deadline before the LLM answered; nothing was stored.
    case shuttingDown
}
