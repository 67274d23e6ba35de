/// Every sentence the server shows a person, as a key: the message catalogue's entries
/// (`Phrase+ja.swift`, `Phrase+en.swift`, one file per language). A sentence is chosen where it is
/// decided and worded only where the answer is written, in the caller's language
/// (`Phrase.text(in:)`): an error thrown before anyone knows who asked is worded for whoever asked.
///
/// Identifiers stay as the contract spells them (`title`, `chat_id`, `mode question`, plan codes):
/// a field name is not translated, so a client can point at the field whatever the language.
public enum Phrase: Sendable, Hashable {
    /// The sentence an error answer carries when its thrower has nothing more specific to say.
    case error(ErrorCode)
    /// `<field>: <problem>`, the field as the contract names it.
    case invalid(field: String, Problem)

    // Errors with something more specific to say.
    case bearerTokenRequired
    case accountGone
    case sessionEnded
    /// The scopes (space-separated names) an operation needs.
    case scopesNeeded(String, count: Int)
    /// The methods (an `Allow` value) a path takes.
    case methodsAllowed(String)
    case chatChangedMeanwhile
    case noSuchRecall
    case tutorNotConfigured
    case turnNotStoredShuttingDown
    case purchasesNotConfigured
    case webhookNotConfigured
    case contractFileMissing
    /// The schema's version and how many of this build's migrations it lacks.
    case schemaBehind(version: Int, missing: Int)
    case appVersionUnsupported(version: String, minimum: String)
    /// `Too many <what>`: requests in general, or one kind of them.
    case tooMany(Throttled, retryAfterSeconds: Int)
    case featureNeedsPlan(PlanFeature, plan: String)
    case dailyTurnsUsed(plan: String, allowed: Int)
    case formFieldWithoutValue
    case queryParameterWithoutValue
    case jsonBodyRequired
    /// An operator's own words (the remote config's maintenance message), shown as written in
    /// every language.
    case announcement(String)
    /// The generated code refused a parameter; `detail` is its own (English) account of which.
    case requestOutsideContract(detail: String)

    // What the server writes into a learner's data or a push.
    /// A chat created without a title: the date and time it was created, `yyyy-MM-dd HH:mm`.
    case untitledChat(createdAt: String)
    /// A chat whose first message is blank after flattening (the contract refuses those; defensive).
    case untitledTurnChat
    /// An instant question's chat: its topic's name, else its subject's.
    case instantQuestionChat(about: String)
    case recallPushTitle
    /// The push of a due recall: the catalogue's name of what the chat is about, when it has one.
    case recallPushBody(topic: String?)
    case trophyName(Trophy)
    case streakPushTitle
    /// The streak push: `days` is the streak that breaks tonight unless today counts.
    case streakPushBody(days: Int)

    /// The trophies (M-010), by the code clients see; what unlocks each is written in
    /// `Sources/BFF/Achievements/AchievementRules.swift`, their names here.
    public enum Trophy: String, CaseIterable, Sendable {
        case firstExplanation = "first_explanation"
        case streak3 = "streak_3"
        case streak7 = "streak_7"
        case streak30 = "streak_30"
        case firstRecall = "first_recall"
        case recalls10 = "recalls_10"
        case tagMastered = "tag_mastered"
        case subjectMastered = "subject_mastered"
    }

    /// Kinds of requests a rate limit names.
    public enum Throttled: Sendable, Hashable {
        case requests
        /// Refreshes of one session (its family's limit).
        case sessionRefreshes
        /// Exports of one account: one is still running.
        case concurrentExports
    }

    /// Features a plan may lack.
    public enum PlanFeature: Sendable, Hashable {
        case instantQuestions
    }

    /// What is wrong with one field.
    public enum Problem: Sendable, Hashable {
        case mustBeJSON
        case mustBeForm
        case mustBeUUID
        case mustBeInteger
        case required
        case mustNotBeBlank
        case invalidValue
        case undecodable
        /// JSON Schema's type name: string, integer, number, boolean, object, array.
        case mustBeOfType(String)
        case mustBeNonNull(String)
        case between(Int, Int)
        /// Characters as code points, as the contract's `maxLength` counts them.
        case atMostCharacters(Int)
        case lengthBetween(Int, Int)
        case titleLength
        case noControlCharacters
        case noNULCharacters
        case atMostEntries(Int)
        case appearsTwice
        case atMostDistinctTopics(Int)
        /// The text given (at most 40 characters of it) is not an RFC 3339 date-time.
        case notRFC3339(String)
        case yearOutOfRange
        case appVersionShape
        case regionShape
        case idempotencyKeyShape
        case timeOfDayShape
        case timeZoneShape
        case windowEndEqualsStart
        case deviceIDShape
        case codeChallengeShape
        case authorizationCodeShape
        case stateShape
        case refreshTokenShape
        case notThisSessionsDevice
        case pushProviderChoice
        case apnsFromIOSOnly
        case apnsTokenShape
        case fcmTokenShape
        case productIDShape
        case receiptShape
        case requiredForTurn
        case questionOnly
        case leftOutWithQuestionAIAsks
        case leftOutWithQuestionStartsChat
        case requiredWithQuestion
        case noSuchSubject
        case noSuchTopic
        case topicOfAnotherSubject
        /// `topic` is not a topic of `subject` (both ids).
        case notATopicOf(topic: String, subject: String)
    }

    /// The sentence in `language`.
    public func text(in language: Language) -> String {
        switch language {
        case .ja: japanese
        case .en: english
        }
    }
}
