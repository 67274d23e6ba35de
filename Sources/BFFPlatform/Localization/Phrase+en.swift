/// The message catalogue in English, the second language.
extension Phrase {
    var english: String {
        switch self {
        case .error(let code): code.english
        case .invalid(let field, let problem): "\(field): \(problem.english)"
        case .bearerTokenRequired: "A bearer access token is required."
        case .accountGone: "The account of this token no longer exists."
        case .sessionEnded: "This session has ended; sign in again."
        case .scopesNeeded(let names, let count): "This operation needs the scope\(count == 1 ? "" : "s") \(names)."
        case .methodsAllowed(let allow): "This path accepts \(allow)."
        case .chatChangedMeanwhile: "The chat was changed after your copy (updated_at); reload it and retry."
        case .noSuchRecall: "No such recall."
        case .tutorNotConfigured: "The tutor is not configured on this server."
        case .turnNotStoredShuttingDown: "This server is shutting down and did not store the turn; send it again."
        case .purchasesNotConfigured: "Purchases are not configured on this server."
        case .webhookNotConfigured: "The RevenueCat webhook is not configured on this server (BFF_REVENUECAT_WEBHOOK_AUTH)."
        case .contractFileMissing: "This server was started without its contract file (BFF_OPENAPI_FILE)."
        case .schemaBehind(let version, let missing):
            "The database schema is at version \(version) with \(missing) of this build's migrations missing; run bff migrate."
        case .appVersionUnsupported(let version, let minimum):
            "Version \(version) is no longer supported; update to \(minimum) or later from the store."
        case .tooMany(let what, let seconds):
            switch what {
            case .requests: "Too many requests; retry after \(seconds) seconds."
            case .sessionRefreshes: "Too many refreshes for this session; retry after \(seconds) seconds."
            case .concurrentExports: "Too many exports at once; one is still running; retry after \(seconds) seconds."
            }
        case .featureNeedsPlan(let feature, let plan):
            switch feature {
            case .instantQuestions: "Instant questions need the \(plan) plan."
            }
        case .dailyTurnsUsed(let plan, let allowed): "Your \(plan) plan allows \(allowed) tutoring turns a day; more when your day ends."
        case .announcement(let text): text
        case .formFieldWithoutValue: "The form body is malformed: every field needs a value."
        case .queryParameterWithoutValue: "The query string is malformed: every parameter needs a value."
        case .jsonBodyRequired: "A JSON request body is required."
        case .requestOutsideContract(let detail): detail
        case .untitledChat(let createdAt): "Chat \(createdAt)"
        case .untitledTurnChat: "Chat"
        case .instantQuestionChat(let about): "Question on \(about)"
        case .recallPushTitle: "Time to review"
        case .recallPushBody(let topic): topic.map { "Try explaining “\($0)” once more" } ?? "Try explaining what you learned once more"
        case .trophyName(let trophy):
            switch trophy {
            case .firstExplanation: "First explanation"
            case .streak3: "3-day streak"
            case .streak7: "7-day streak"
            case .streak30: "30-day streak"
            case .firstRecall: "First recall"
            case .recalls10: "10 recalls"
            case .tagMastered: "A misconception overcome"
            case .subjectMastered: "A whole subject mastered"
            }
        case .streakPushTitle: "Keep your streak going"
        case .streakPushBody(let days): "You haven't studied today yet. Explain one thing to make it \(days + 1) days in a row."
        }
    }
}

extension ErrorCode {
    var english: String {
        switch self {
        case .badRequest: "The request is malformed."
        case .invalidJSON: "The request body is not valid JSON."
        case .invalidForm: "The form body is malformed."
        case .invalidState: "The login is unknown, expired or already used; start again."
        case .invalidGrant: "The code_verifier does not match this login; start again."
        case .invalidRedirectURI: "redirect_uri is not registered for this app."
        case .invalidLogoutToken: "The logout token is not valid."
        case .notAcceptable: "This API answers application/json only; accept application/json or */*."
        case .invalidToken: "The access token is missing, expired or invalid."
        case .refreshReused: "The refresh token was already used; the session was revoked for safety."
        case .refreshExpired: "The refresh token has expired; sign in again."
        case .invalidRefreshToken: "The refresh token is not valid."
        case .sessionRevoked: "This session was revoked; sign in again."
        case .idpRejected: "The identity provider did not accept the login."
        case .webhookUnauthorized: "The Authorization header is not the one configured for this webhook."
        case .insufficientScope: "The access token lacks the scope this operation needs."
        case .originNotAllowed: "A request authenticated by the session cookie must come from an allowed origin."
        case .planRequired: "This feature needs a higher plan."
        case .reauthenticationRequired: "This needs a recent sign-in; sign in again and retry."
        case .notFound: "The requested resource does not exist."
        case .methodNotAllowed: "This path does not accept this method."
        case .staleUpdate: "The resource was changed after your copy; reload it and retry."
        case .idempotencyInProgress: "A request with this Idempotency-Key is still being processed; retry."
        case .recallDone: "This recall was already evaluated."
        case .recallCanceled: "This recall was canceled: its chat was deleted."
        case .chatEnded: "This chat has ended; start a new one."
        case .payloadTooLarge: "The request body is larger than allowed."
        case .unsupportedMediaType: "Send the body as application/json."
        case .validationFailed: "The request does not match the contract."
        case .invalidCursor: "cursor is not a cursor of this list and its filters."
        case .idempotencyKeyReused: "This Idempotency-Key was used with another request body."
        case .unknownSubject: "No such subject."
        case .unknownTopic: "No such topic."
        case .contentFiltered: "The tutor cannot answer this message. Please rephrase it."
        case .invalidReceipt: "The store did not accept this receipt."
        case .upgradeRequired: "This version of the app is no longer supported; update it from the store."
        case .rateLimited: "Too many requests; retry later."
        case .quotaExceeded: "Your plan's quota for today is used up."
        case .internal: "An internal error occurred; it has been logged with the request id."
        case .databaseUnavailable: "The database is unavailable; retry shortly."
        case .idpUnavailable: "The identity provider is unavailable; retry shortly."
        case .llmUnavailable: "The tutor is unavailable; retry shortly."
        case .storeUnavailable: "The app store is unavailable; retry shortly."
        case .notReady: "The service is not ready."
        case .maintenance: "The service is under maintenance; please try again later."
        }
    }
}

extension Phrase.Problem {
    var english: String {
        switch self {
        case .mustBeJSON: "must be JSON"
        case .mustBeForm: "must be a form"
        case .mustBeUUID: "must be a UUID"
        case .mustBeInteger: "must be an integer"
        case .required: "is required"
        case .mustNotBeBlank: "must not be blank"
        case .invalidValue: "has an invalid value"
        case .undecodable: "could not be decoded"
        case .mustBeOfType(let type): "must be of type \(type)"
        case .mustBeNonNull(let type): "must be a non-null \(type)"
        case .between(let low, let high): "must be between \(low) and \(high)"
        case .atMostCharacters(let count): "must be at most \(count) characters"
        case .lengthBetween(let low, let high): "must be \(low) to \(high) characters"
        case .titleLength: "must be 1-200 characters after trimming"
        case .noControlCharacters: "must not contain control characters"
        case .noNULCharacters: "must not contain NUL characters"
        case .atMostEntries(let count): "must have at most \(count) entries"
        case .appearsTwice: "appears twice"
        case .atMostDistinctTopics(let count): "must be at most \(count) distinct topics"
        case .notRFC3339(let text):
            "\"\(text)\" is not an RFC 3339 date-time (YYYY-MM-DDThh:mm:ss[.fraction] and Z or ±hh:mm, years 0001-9999)"
        case .yearOutOfRange: "must lie in years 0001-9999"
        case .appVersionShape: "must be a version such as 1.4.0"
        case .regionShape: "must be a two-letter region code such as JP"
        case .idempotencyKeyShape: "must be 1-255 visible ASCII characters"
        case .timeOfDayShape: "must be a time HH:MM"
        case .timeZoneShape: "must be an IANA time zone such as Asia/Tokyo"
        case .windowEndEqualsStart: "must differ from start (end before start spans midnight)"
        case .deviceIDShape: "must be 8-128 characters of A-Z a-z 0-9 . _ : -"
        case .codeChallengeShape: "must be the S256 challenge of the app's verifier: 43 characters of A-Z a-z 0-9 - _"
        case .authorizationCodeShape: "must be 1-2048 visible ASCII characters"
        case .stateShape: "must be 1-256 characters of A-Z a-z 0-9 - _"
        case .refreshTokenShape: "must be 43 base64url characters"
        case .notThisSessionsDevice: "must be the device this session signed in on"
        case .pushProviderChoice: "must be apns, fcm or null"
        case .apnsFromIOSOnly: "apns tokens come from iOS devices only"
        case .apnsTokenShape: "an APNs token is 64-200 hexadecimal digits, an even count"
        case .fcmTokenShape: "must be 64-2048 characters of A-Z a-z 0-9 _ : -"
        case .productIDShape: "must be 1 to 200 characters of letters, digits, '.', '_' and '-'"
        case .receiptShape: "must be a store receipt or purchase token of at most 60,000 base64 or token characters"
        case .requiredForTurn: "is required (mode turn)"
        case .questionOnly: "is for mode question only"
        case .leftOutWithQuestionAIAsks: "must be left out with mode question: the AI asks"
        case .leftOutWithQuestionStartsChat: "must be left out with mode question: it starts a chat"
        case .requiredWithQuestion: "is required with mode question"
        case .noSuchSubject: "no such subject."
        case .noSuchTopic: "no such topic."
        case .topicOfAnotherSubject: "the topic belongs to another subject."
        case .notATopicOf(let topic, let subject): "\(topic) is not a topic of \(subject)."
        }
    }
}
