import Foundation
import HTTPTypes
import Logging
import Testing

@testable import BFF
@testable import BFFPlatform

/// The chats', the turn's and the purchases' refusals are domain errors whose answers live in the
/// handlers: these hold the answers as clients see them (status, code, message and `Retry-After`),
/// including the ones no HTTP test reaches.
@Suite("Domain errors' answers", .timeLimit(.minutes(3)))
struct DomainErrorAnswerTests {
    /// An answer as an English-speaking client reads it.
    private struct Answer {
        let code: ErrorCode
        let english: String

        init(_ code: ErrorCode, _ english: String? = nil) {
            self.code = code
            self.english = english ?? Phrase.error(code).text(in: .en)
        }

        static func validation(_ field: String, _ problem: String) -> Answer { Answer(.validationFailed, "\(field): \(problem)") }
        static let notFound = Answer(.notFound)
    }

    private func expectAnswer(_ error: any Error, _ expected: Answer, retryAfter: String? = nil) {
        let answer = ErrorMapping.apiError(for: error)
        #expect(answer?.code == expected.code && answer?.status == expected.code.status, "\(error)")
        #expect(answer?.message.text(in: .en) == expected.english, "\(error)")
        #expect(answer?.headers[.retryAfter] == retryAfter, "\(error)")
    }

    @Test("chats: a field, the Idempotency-Key, the page and the catalogue")
    func chats() {
        expectAnswer(ChatError.invalid(field: "title", problem: .noControlCharacters), .validation("title", "must not contain control characters"))
        expectAnswer(IdempotencyError.malformedKey, Answer(.validationFailed, "Idempotency-Key: must be 1-255 visible ASCII characters"))
        expectAnswer(IdempotencyError.keyReused, Answer(.idempotencyKeyReused, "This Idempotency-Key was used with another request body."))
        expectAnswer(IdempotencyError.inProgress, Answer(.idempotencyInProgress))
        expectAnswer(PageError.invalidCursor, Answer(.invalidCursor))
        expectAnswer(PageError.limitOutOfRange(max: 200), Answer(.validationFailed, "limit: must be between 1 and 200"))
        expectAnswer(CatalogueError.unknownTopic(field: "topic_id", problem: .noSuchTopic), Answer(.unknownTopic, "topic_id: no such topic."))
        #expect(throws: PageError.invalidCursor) { try KeysetCursor.decode("not a cursor", expecting: .messages) }
        #expect(throws: PageError.limitOutOfRange(max: 50)) { try PageLimit.resolve(51, default: 20, max: 50) }
        #expect(throws: IdempotencyError.malformedKey) { try IdempotencyRequest.check("") }
    }

    @Test("the tutoring turn: the chat, the LLM and the drain, with Retry-After where the app must wait")
    func turn() {
        expectAnswer(TurnRefusal.invalid(field: "message", problem: .mustNotBeBlank), .validation("message", "must not be blank"))
        expectAnswer(TurnRefusal.chatNotFound, .notFound)
        expectAnswer(TurnRefusal.chatEnded, Answer(.chatEnded))
        expectAnswer(TurnRefusal.tutorUnavailable(retryAfterSeconds: 7), Answer(.llmUnavailable), retryAfter: "7")
        expectAnswer(
            TurnRefusal.tutorNotConfigured(retryAfterSeconds: ChatTurn.misconfiguredRetryAfter),
            Answer(.llmUnavailable, "The tutor is not configured on this server."), retryAfter: "60")
        expectAnswer(TurnRefusal.contentFiltered, Answer(.contentFiltered))
        expectAnswer(TurnRefusal.shuttingDown, Answer(.notReady, "This server is shutting down and did not store the turn; send it again."), retryAfter: "1")
        let decision = RateLimiter.Decision(allowed: false, ahead: 12.5, rate: 5, periodSeconds: 10)
        let limited = ErrorMapping.apiError(for: TurnRefusal.rateLimited(decision))
        #expect(limited == APIError.rateLimited(decision) && limited?.headers == APIError.rateLimited(decision).headers)

        let logger = Logger(label: "test")
        #expect((ChatTurn.answer(for: ChatTurn.ShuttingDown(), logger: logger) as? TurnRefusal) == .shuttingDown)
        #expect(
            (ChatTurn.answer(for: LLMFailure.unavailable("down", retryAfter: nil), logger: logger) as? TurnRefusal)
                == .tutorUnavailable(retryAfterSeconds: ChatTurn.defaultRetryAfter))
        #expect((ChatTurn.answer(for: LLMFailure.contentFiltered("no"), logger: logger) as? TurnRefusal) == .contentFiltered)
        #expect(
            (ChatTurn.answer(for: LLMFailure.misconfigured("key"), logger: logger) as? TurnRefusal)
                == .tutorUnavailable(retryAfterSeconds: ChatTurn.misconfiguredRetryAfter))
    }

    @Test("the plan: a feature it lacks, and its day's turns used up until the learner's day ends")
    func plan() {
        expectAnswer(PlanRefusal.planRequired(.instantQuestion, needed: .basic), Answer(.planRequired, "Instant questions need the basic plan."))
        let used = Answer(.quotaExceeded, "Your free plan allows 10 tutoring turns a day; more when your day ends.")
        expectAnswer(PlanRefusal.quotaExhausted(plan: .free, allowed: 10, secondsLeft: 0.2), used, retryAfter: "1")
        expectAnswer(PlanRefusal.quotaExhausted(plan: .free, allowed: 10, secondsLeft: 3600.5), used, retryAfter: "3601")
    }

    @Test("purchases: not configured, a refused receipt, and the store down")
    func purchases() {
        expectAnswer(PurchaseRefusal.notConfigured, Answer(.storeUnavailable, "Purchases are not configured on this server."))
        expectAnswer(PurchaseRefusal.receiptRefused, Answer(.invalidReceipt))
        expectAnswer(PurchaseRefusal.storeUnavailable(retryAfterSeconds: 60), Answer(.storeUnavailable), retryAfter: "60")
        let decision = RateLimiter.Decision(allowed: false, ahead: 70, rate: 10, periodSeconds: 60)
        #expect(ErrorMapping.apiError(for: PurchaseRefusal.rateLimited(decision))?.headers == APIError.rateLimited(decision).headers)
    }
}
