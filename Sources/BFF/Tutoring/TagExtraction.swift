import BFFJobs
import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// Misconception tags from the dialogue (M-003): after each stored turn, a job asks the LLM which of
/// the chat's catalogue tags (its subject's; every tag for a chat without one) the learner's
/// explanations show a misconception in, with a confidence, as structured output whose schema lists
/// only those codes. Codes outside the catalogue are dropped (a provider that ignores the schema
/// cannot invent tags), and so are findings below `threshold`; the others are attached to the chat,
/// where evaluation moves their mastery as before. A failed extraction is retried and then
/// dead-lettered; it never touches the turn.
struct TagExtraction: Sendable {
    static let kind = "tags.extract"
    /// Findings below this confidence are left out.
    static let threshold = 0.5
    /// Characters of the dialogue sent, newest first.
    static let dialogueBudget = 12_000

    let database: Database
    let llm: LLMClient
    let logger: Logger

    struct Args: Codable {
        let chatID: UUID
    }

    var handler: JobHandler {
        JobHandler(kind: Self.kind) { job in try await extract(job) }
    }

    func extract(_ job: Job) async throws {
        let args = try job.decode(Args.self)
        guard let userID = job.userID else { throw JobFailure.deadLetter("an extraction without its user") }
        let (catalogue, dialogue) = try await database.run { client in
            var subject: String??
            for try await value in try await client.query(
                "SELECT subject_id FROM chats WHERE id = \(args.chatID) AND user_id = \(userID) AND deleted_at IS NULL", logger: logger
            ).decode(String?.self) { subject = .some(value) }
            // The chat was deleted since: nothing to tag.
            guard let subject else { return ([(code: String, label: String)](), [LLMMessage]()) }
            var catalogue: [(code: String, label: String)] = []
            for try await (code, label) in try await client.query(
                "SELECT code, label FROM tags WHERE \(subject)::text IS NULL OR code LIKE \(subject ?? "") || '.%' ORDER BY code", logger: logger
            ).decode((String, String).self) { catalogue.append((code, label)) }
            return (catalogue, try await ChatStore.dialogue(client, chatID: args.chatID, userID: userID, logger: logger))
        }
        guard !catalogue.isEmpty, dialogue.contains(where: { $0.role == .user }) else { return }

        let completion: LLMCompletion
        do {
            completion = try await llm.complete(Self.request(catalogue: catalogue, dialogue: dialogue))
        } catch let failure as LLMFailure {
            switch failure {
            case .unavailable(let reason, let after): throw JobFailure.retry("LLM unavailable: \(reason)", after: after)
            case .contentFiltered, .misconfigured: throw JobFailure.deadLetter(failure.description)
            }
        }
        let known = Set(catalogue.map(\.code))
        guard let findings = Self.findings(completion.text) else {
            throw JobFailure.retry("the structured output is not the schema's JSON", after: nil)
        }
        let codes = findings.filter { known.contains($0.code) && $0.confidence >= Self.threshold }.map(\.code)
        let dropped = findings.filter { !known.contains($0.code) }.count
        if dropped > 0 { logger.notice("tags outside the catalogue dropped", metadata: ["count": .stringConvertible(dropped)]) }
        guard !codes.isEmpty else { return }
        try await ChatStore.tag(chatID: args.chatID, userID: userID, codes: codes, database: database, logger: logger)
    }

    /// The prompt: the catalogue, the dialogue (learner = the explainer), and a schema of its codes.
    static func request(catalogue: [(code: String, label: String)], dialogue: [LLMMessage]) -> LLMRequest {
        let transcript = TutoringPrompt.newest(dialogue, budget: dialogueBudget).map { "\($0.role == .user ? "説明者" : "生徒役"): \($0.content)" }.joined(separator: "\n")
        let list = catalogue.map { "- \($0.code): \($0.label)" }.joined(separator: "\n")
        let system = """
            あなたは学習支援の分析者です。次の対話で「説明者」の説明に現れている誤解を、タグ一覧の中からだけ選んでください。
            誤解が見られないタグは含めないでください。各タグに 0〜1 の確信度を付けてください。
            タグ一覧:
            \(list)
            """
        let codes = catalogue.map { #""\#($0.code.replacingOccurrences(of: "\"", with: ""))""# }.joined(separator: ",")
        let schema = """
            {"type":"object","additionalProperties":false,"required":["misconceptions"],"properties":{"misconceptions":{"type":"array","items":\
            {"type":"object","additionalProperties":false,"required":["code","confidence"],"properties":{"code":{"type":"string","enum":[\(codes)]},\
            "confidence":{"type":"number"}}}}}}
            """
        return LLMRequest(
            messages: [LLMMessage(role: .system, content: system), LLMMessage(role: .user, content: transcript)],
            jsonSchema: (name: "misconceptions", schema: schema))
    }

    struct Finding: Decodable, Equatable {
        let code: String
        let confidence: Double
    }

    /// The structured output's findings; nil when it is not the schema's JSON.
    static func findings(_ text: String) -> [Finding]? {
        struct Output: Decodable { let misconceptions: [Finding] }
        return (try? JSONDecoder().decode(Output.self, from: Data(text.utf8)))?.misconceptions
    }
}
