import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// Japanese first, English second (requirements §2.3): which language a request is answered in,
/// that every sentence exists in both, and that no English sentence reaches a Japanese caller.
@Suite("Languages")
struct LanguageTests {
    @Test(
        "Accept-Language: q-values, primary subtags, the wildcard, refusals and ties decide; none of ours is nil",
        arguments: [
            (nil, nil), ("", nil), ("en", Language.en), ("ja", .ja), ("EN-us", .en), ("ja-JP", .ja),
            ("en-US,ja;q=0.5", .en), ("ja;q=0.3, en;q=0.8", .en), ("en, ja", .en), ("ja, en", .ja),
            ("fr", nil), ("fr, *", .ja), ("fr, *;q=0.5, en;q=0.4", .ja), ("*;q=0.1, en;q=0.4", .en),
            ("en;q=0", nil), ("ja;q=0, *", .en), ("ja;q=0, en;q=0", nil), ("en;q=abc, ja;q=0.1", .ja),
            ("de-DE, en-GB;q=0.9, ja;q=0.8", .en), (" en ; q=1.0 ", .en), ("en;q=2", nil),
        ] as [(String?, Language?)])
    func negotiation(header: String?, expected: Language?) {
        #expect(Language.negotiate(header) == expected)
    }

    /// Three ASCII words in a row: an English sentence (or its start). Identifiers, field names,
    /// headers and character classes never make three.
    private static func hasEnglishRun(_ text: String) -> Bool {
        text.firstMatch(of: /[A-Za-z]{2,}(?: [A-Za-z]{2,}){2,}/) != nil
    }
    private static func hasJapanese(_ text: String) -> Bool {
        text.unicodeScalars.contains { (0x3040...0x30FF).contains($0.value) || (0x4E00...0x9FFF).contains($0.value) }
    }

    /// One of every phrase (the catalogues' switches are exhaustive: the compiler holds every phrase
    /// to a sentence in both languages; these hold each sentence to its language).
    static let phrases: [Phrase] =
        ErrorCode.allCases.map(Phrase.error)
        + problems.map { Phrase.invalid(field: "notification_window.timezone", $0) }
        + [
            .bearerTokenRequired, .accountGone, .sessionEnded, .scopesNeeded("chat:rw", count: 1), .scopesNeeded("chat:rw iap:verify", count: 2),
            .methodsAllowed("GET, PUT"), .chatChangedMeanwhile, .noSuchRecall, .tutorNotConfigured, .turnNotStoredShuttingDown,
            .purchasesNotConfigured, .webhookNotConfigured, .contractFileMissing, .schemaBehind(version: 31, missing: 2),
            .appVersionUnsupported(version: "1.1.9", minimum: "1.2.0"), .tooMany(.requests, retryAfterSeconds: 3),
            .tooMany(.sessionRefreshes, retryAfterSeconds: 3), .tooMany(.concurrentExports, retryAfterSeconds: 3),
            .featureNeedsPlan(.instantQuestions, plan: "basic"), .dailyTurnsUsed(plan: "free", allowed: 10), .formFieldWithoutValue,
            .queryParameterWithoutValue, .jsonBodyRequired, .requestOutsideContract(detail: "Unexpected value for query parameter limit"),
            .untitledChat(createdAt: "2026-11-27 09:30"), .untitledTurnChat, .instantQuestionChat(about: "細胞"), .recallPushTitle,
            .recallPushBody(topic: "細胞"), .recallPushBody(topic: nil), .streakPushTitle, .streakPushBody(days: 4),
        ] + Phrase.Trophy.allCases.map(Phrase.trophyName)

    static let problems: [Phrase.Problem] = [
        .mustBeJSON, .mustBeForm, .mustBeUUID, .mustBeInteger, .required, .mustNotBeBlank, .invalidValue, .undecodable,
        .mustBeOfType("integer"), .mustBeNonNull("string"), .between(1, 5), .atMostCharacters(1000), .lengthBetween(1, 200),
        .titleLength, .noControlCharacters, .noNULCharacters, .atMostEntries(50), .appearsTwice, .atMostDistinctTopics(100),
        .notRFC3339("2026-02-30"), .yearOutOfRange, .appVersionShape, .regionShape, .idempotencyKeyShape, .timeOfDayShape,
        .timeZoneShape, .windowEndEqualsStart, .deviceIDShape, .codeChallengeShape, .authorizationCodeShape, .stateShape,
        .refreshTokenShape, .notThisSessionsDevice, .pushProviderChoice, .apnsFromIOSOnly, .apnsTokenShape, .fcmTokenShape,
        .productIDShape, .receiptShape, .requiredForTurn, .questionOnly, .leftOutWithQuestionAIAsks, .leftOutWithQuestionStartsChat,
        .requiredWithQuestion, .noSuchSubject, .noSuchTopic, .topicOfAnotherSubject, .notATopicOf(topic: "math.calculus", subject: "physics"),
    ]

    @Test("every ErrorCode has a sentence in both languages, and they differ")
    func everyCodeInBothLanguages() {
        for code in ErrorCode.allCases {
            let ja = Phrase.error(code).text(in: .ja), en = Phrase.error(code).text(in: .en)
            #expect(!ja.isEmpty && !en.isEmpty && ja != en, "\(code)")
            #expect(Self.hasJapanese(ja), "\(code): \(ja)")
            #expect(!Self.hasJapanese(en), "\(code): \(en)")
        }
    }

    @Test("no English sentence reaches a Japanese caller; the English catalogue is English; a field keeps its ASCII name in both")
    func noEnglishSentenceInJapanese() {
        for phrase in Self.phrases {
            let ja = phrase.text(in: .ja), en = phrase.text(in: .en)
            #expect(Self.hasJapanese(ja), "\(phrase): \(ja)")
            #expect(!Self.hasEnglishRun(ja), "\(phrase): \(ja)")
            // The learner-given topic is the only Japanese an English sentence may carry.
            #expect(!Self.hasJapanese(en.replacingOccurrences(of: "細胞", with: "")), "\(phrase): \(en)")
            if case .invalid(let field, _) = phrase {
                #expect(ja.hasPrefix("\(field): ") && en.hasPrefix("\(field): "))
            }
        }
    }
}

/// The same over HTTP: the header, the setting, `Content-Language`, and the catalogue's names.
@Suite("Languages over HTTP", .needsDatabase, .timeLimit(.minutes(3)))
struct LanguageHTTPTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    private static let missingChat = "/api/v1/chats/\(UUID().uuidString.lowercased())"

    @Test("an error is Japanese by default, in the language Accept-Language prefers, with the same code, and names its language")
    func errorsFollowTheHeader() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let plain = try await client.call(.get, Self.missingChat, as: learner)
            #expect(plain.status == .notFound && plain.errorCode == "not_found")
            #expect(plain.json["message"] as? String == "指定されたリソースは存在しません。" && plain.headers[.contentLanguage] == "ja")
            for (header, language) in [("en", "en"), ("fr, en;q=0.5", "en"), ("en-US, ja;q=0.9", "en"), ("ja-JP", "ja"), ("fr", "ja")] {
                let answer = try await client.call(.get, Self.missingChat, as: learner, headers: [.acceptLanguage: header])
                #expect(answer.errorCode == "not_found" && answer.headers[.contentLanguage] == language, "\(header)")
                #expect(answer.json["message"] as? String == Phrase.error(.notFound).text(in: Language(rawValue: language)!), "\(header)")
            }
            // Refused before anyone is known: the header alone decides.
            let anonymous = try await client.execute(uri: "/api/v1/me", method: .get, headers: [.acceptLanguage: "en"])
            #expect(anonymous.status == .unauthorized && anonymous.json["message"] as? String == "A bearer access token is required.")
            let anonymousJA = try await client.execute(uri: "/api/v1/me", method: .get)
            #expect(anonymousJA.json["message"] as? String == "Bearer アクセストークンが必要です。" && anonymousJA.headers[.contentLanguage] == "ja")
            // A validation message names the field in ASCII and words the rest in the language.
            let invalid = SettingsTests.valid.replacingOccurrences(of: "Europe/Paris", with: "Mars/Olympus")
            let ja = try await client.call(.put, "/api/v1/settings", as: learner, json: invalid)
            #expect(ja.json["message"] as? String == "notification_window.timezone: Asia/Tokyo のような IANA タイムゾーンで指定してください。")
            let en = try await client.call(.put, "/api/v1/settings", as: learner, json: invalid, headers: [.acceptLanguage: "en"])
            #expect(en.json["message"] as? String == "notification_window.timezone: must be an IANA time zone such as Asia/Tokyo")
            #expect(ja.errorCode == "validation_failed" && en.errorCode == "validation_failed")
        }
    }

    @Test("the language setting: ja by default, stored when sent, kept when left out or null, refused when unknown; it answers requests without the header")
    func theSetting() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            #expect(try await client.call(.get, "/api/v1/settings", as: learner).json["language"] as? String == "ja")
            let english = SettingsTests.valid.dropLast() + #","language":"en"}"#
            #expect(try await client.call(.put, "/api/v1/settings", as: learner, json: String(english)).json["language"] as? String == "en")
            #expect(try await client.call(.put, "/api/v1/settings", as: learner, json: SettingsTests.valid).json["language"] as? String == "en")
            let null = SettingsTests.valid.dropLast() + #","language":null}"#
            #expect(try await client.call(.put, "/api/v1/settings", as: learner, json: String(null)).json["language"] as? String == "en")
            let french = SettingsTests.valid.dropLast() + #","language":"fr"}"#
            let refused = try await client.call(.put, "/api/v1/settings", as: learner, json: String(french))
            #expect(refused.status == .unprocessableContent && refused.errorCode == "validation_failed")
            #expect(try await client.call(.get, "/api/v1/settings", as: learner).json["language"] as? String == "en")

            // No header: the setting. A header: the header.
            let bySetting = try await client.call(.get, Self.missingChat, as: learner)
            #expect(bySetting.json["message"] as? String == "The requested resource does not exist." && bySetting.headers[.contentLanguage] == "en")
            let byHeader = try await client.call(.get, Self.missingChat, as: learner, headers: [.acceptLanguage: "ja"])
            #expect(byHeader.json["message"] as? String == "指定されたリソースは存在しません。" && byHeader.headers[.contentLanguage] == "ja")
            let subjects = try await client.call(.get, "/api/v1/subjects", as: learner)
            #expect(subjects.headers[.contentLanguage] == "en")
            #expect((subjects.json["items"] as? [[String: Any]])?.first { $0["id"] as? String == "math" }?["name"] as? String == "Mathematics")

            let japanese = SettingsTests.valid.dropLast() + #","language":"ja"}"#
            #expect(try await client.call(.put, "/api/v1/settings", as: learner, json: String(japanese)).json["language"] as? String == "ja")
            let back = try await client.call(.get, Self.missingChat, as: learner)
            #expect(back.json["message"] as? String == "指定されたリソースは存在しません。")
        }
    }

    @Test("another replica, which did not take the change, reads the setting when it has something to word: an error, the catalogue, a turn's title")
    func anotherReplica() async throws {
        let learner = try await Learner.make(database: database)
        let first = try await makeTestApp(database: database)
        try await first.live { client in
            let english = SettingsTests.valid.dropLast() + #","language":"en"}"#
            let stored = try await client.call(.put, "/api/v1/settings", as: learner, json: String(english))
            #expect(stored.status == .ok)
        }
        let second = try await makeTestApp(database: database)
        try await second.live { client in
            // Nothing to word: no read, and no language claimed.
            let chats = try await client.call(.get, "/api/v1/chats", as: learner)
            #expect(chats.status == .ok && chats.headers[.contentLanguage] == nil)
            let missing = try await client.call(.get, Self.missingChat, as: learner)
            #expect(missing.json["message"] as? String == "The requested resource does not exist." && missing.headers[.contentLanguage] == "en")
            let created = try await client.call(.post, "/api/v1/chats", as: learner, json: "{}")
            #expect((created.json["title"] as? String)?.hasPrefix("Chat 20") == true && created.headers[.contentLanguage] == "en")
        }
    }

    @Test("the catalogue answers in the caller's language, the web's own name where a row has no translation")
    func catalogueNames() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            func names(_ header: String?) async throws -> [String: String] {
                let answer = try await client.call(.get, "/api/v1/subjects", as: learner, headers: header.map { [.acceptLanguage: $0] } ?? [:])
                var names: [String: String] = [:]
                for subject in answer.json["items"] as? [[String: Any]] ?? [] {
                    names[subject["id"] as? String ?? ""] = subject["name"] as? String
                    for topic in subject["topics"] as? [[String: Any]] ?? [] { names[topic["id"] as? String ?? ""] = topic["name"] as? String }
                }
                return names
            }
            let ja = try await names(nil), en = try await names("en")
            #expect(ja["math"] == "数学" && ja["japanese"] == "国語" && ja["math.linear_equations"] == "一次方程式" && ja["japanese.classical"] == "古文")
            #expect(en["math"] == "Mathematics" && en["math.linear_equations"] == "Linear equations")
            // Every seeded row is translated: no English name reaches a Japanese caller.
            #expect(ja.values.allSatisfy { $0.unicodeScalars.contains { $0.value > 0x3000 } }, "\(ja)")
        }
    }

    @Test("a misconception tag's label is in the caller's language: the chat's tags, the evaluation's, the recall's")
    func tagLabels() async throws {
        let learner = try await Learner.make(database: database)
        let repository = ChatStore.withOwnBatcher(Database(client: PostgresClient(configuration: database.clientConfiguration(poolSize: 2))))
        let app = try await makeTestApp(database: database)
        try await Commands.withDatabase(repository.database.client) { _ in
            try await app.live { client in
                let created = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"力"}"#)
                let chat = try #require(created.json["id"] as? String)
                try await repository.attachTag(userID: learner.id, chatID: try #require(UUID(uuidString: chat)), code: "physics.force_implies_motion")
                func label(_ answer: TestResponse, _ key: String = "items") -> String? {
                    (answer.json[key] as? [[String: Any]])?.first?["label"] as? String
                }
                let ja = try await client.call(.get, "/api/v1/chats/\(chat)/tags", as: learner)
                #expect(label(ja) == "運動には力が必要だという思い込み" && ja.headers[.contentLanguage] == "ja")
                let en = try await client.call(.get, "/api/v1/chats/\(chat)/tags", as: learner, headers: [.acceptLanguage: "en"])
                #expect(label(en) == "Believing motion requires a net force" && en.headers[.contentLanguage] == "en")
                let evaluated = try await client.call(
                    .post, "/api/v1/chats/\(chat)/evaluation", as: learner, json: #"{"score":1}"#, headers: [.acceptLanguage: "en"])
                #expect(label(evaluated, "tags") == "Believing motion requires a net force")
                let recalls = try await client.call(.get, "/api/v1/recalls", as: learner)
                let tags = (recalls.json["items"] as? [[String: Any]])?.first?["tags"] as? [[String: Any]]
                #expect(tags?.first?["label"] as? String == "運動には力が必要だという思い込み", "\(recalls.text)")
            }
        }
    }

    @Test("a chat's default title is written in the caller's language")
    func defaultTitle() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let ja = try await client.call(.post, "/api/v1/chats", as: learner, json: "{}")
            #expect((ja.json["title"] as? String)?.hasPrefix("チャット 20") == true, "\(ja.text)")
            let en = try await client.call(.post, "/api/v1/chats", as: learner, json: "{}", headers: [.acceptLanguage: "en"])
            #expect((en.json["title"] as? String)?.hasPrefix("Chat 20") == true, "\(en.text)")
            #expect(en.headers[.contentLanguage] == "en")
        }
    }
}
