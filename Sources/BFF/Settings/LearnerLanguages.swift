import BFFPlatform
import Foundation
import Logging
import NIOConcurrencyHelpers

/// The learners' `language` settings, for the requests that name no language of ours in
/// `Accept-Language` (the apps send one; a script or the web may not). Read through a small cache,
/// and only when an answer has something to word: most answers carry no sentence of the server's,
/// and a turn is three statements that a fourth for one word would break. A replica that did not
/// take the change itself sees it within `lifetime`.
final class LearnerLanguages: Sendable {
    private struct Entry {
        let language: Language
        let until: ContinuousClock.Instant
    }

    private let settings: SettingsStore
    private let lifetime: Duration
    /// Past this many learners the cache starts over rather than tracking what is oldest.
    private let capacity: Int
    private let entries = NIOLockedValueBox<[UUID: Entry]>([:])

    init(settings: SettingsStore, lifetime: Duration = .seconds(60), capacity: Int = 50_000) {
        self.settings = settings
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// The learner's setting when this replica knows it, without asking the database.
    func cached(_ userID: UUID) -> Language? {
        let now = ContinuousClock.now
        return entries.withLockedValue { $0[userID] }.flatMap { $0.until > now ? $0.language : nil }
    }

    /// The learner's setting; the default when they never saved one, and when the database cannot
    /// say (a wording is no reason to fail a request).
    func language(of userID: UUID, logger: Logger) async -> Language {
        if let cached = cached(userID) { return cached }
        do {
            let language = try await settings.language(userID: userID)
            remember(language, of: userID)
            return language
        } catch {
            logger.debug("learner language unread; answering in the default", metadata: ["error": .string(LoggableError.describe(error))])
            return .default
        }
    }

    /// What this replica just stored or read.
    func remember(_ language: Language, of userID: UUID) {
        let until = ContinuousClock.now + lifetime
        entries.withLockedValue { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[userID] = Entry(language: language, until: until)
        }
    }
}

/// One request's learner language, read at most once and only if something asks
/// (`AppRequestContext.answerLanguage()`); shared by the context's copies down the middleware chain,
/// so the step that sets `Content-Language` knows whether the answer was worded.
final class PendingLearnerLanguage: Sendable {
    let userID: UUID
    private let languages: LearnerLanguages
    private let resolved = NIOLockedValueBox<Language?>(nil)

    init(userID: UUID, languages: LearnerLanguages) {
        self.userID = userID
        self.languages = languages
    }

    /// The language, once something asked for it or learned it otherwise.
    var known: Language? { resolved.withLockedValue { $0 } }

    func language(logger: Logger) async -> Language {
        if let known { return known }
        let language = await languages.language(of: userID, logger: logger)
        resolved.withLockedValue { $0 = language }
        return language
    }

    /// The language as another read found it (the turn reads the setting in its own statement).
    func learned(_ language: Language) {
        resolved.withLockedValue { $0 = language }
        languages.remember(language, of: userID)
    }
}
