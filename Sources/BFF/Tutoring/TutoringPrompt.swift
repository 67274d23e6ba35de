import BFFPlatform

/// The role reversal (docs/requirements.md §4): the learner explains, and the AI plays a curious student
/// who asks back, one question at a time, never handing the answer over. The prompt holds only what
/// the reply needs: the chat's subject and topic, the learner's difficulty, the newest history that
/// fits the budget, and the new message (no name, email or id).
enum TutoringPrompt {
    struct Context: Sendable {
        var subject: String?
        var topic: String?
        /// 1–5, from the learner's settings.
        var difficulty: Int
    }

    static func system(_ context: Context) -> String {
        var lines = [
            "あなたは好奇心旺盛な高校生の「生徒役」です。相手(先生役)があるテーマを説明します。",
            "説明をよく聞き、理解を確かめるための質問を一度に一つだけ返してください。",
            "答えや正解を自分から教えてはいけません。説明に誤りや曖昧な点があれば、相手が自分で気づけるような問いかけをしてください。",
            "返答は自然な日本語で、2〜3文以内にしてください。",
        ]
        if let subject = context.subject { lines.append("教科: \(subject)") }
        if let topic = context.topic { lines.append("単元: \(topic)") }
        lines.append("質問の難易度: \(context.difficulty) / 5 (1は基礎的な確認、5は応用・発展的な問い)")
        return lines.joined(separator: "\n")
    }

    /// The system prompt, as much of `history` (oldest first) as fits `budget` characters counted
    /// from the newest message backwards, and the new message.
    static func messages(_ context: Context, history: [LLMMessage], message: String, budget: Int) -> [LLMMessage] {
        [LLMMessage(role: .system, content: system(context))] + newest(history, budget: budget - message.count)
            + [LLMMessage(role: .user, content: message)]
    }

    /// The newest of `messages` whose characters together fit `budget`, oldest first.
    static func newest(_ messages: [LLMMessage], budget: Int) -> [LLMMessage] {
        var kept: [LLMMessage] = []
        var used = 0
        for message in messages.reversed() {
            used += message.content.count
            guard used <= budget else { break }
            kept.append(message)
        }
        return kept.reversed()
    }

    /// The instant question (M-007): the AI opens a chat with one question on the subject and topic
    /// at the difficulty, for the learner to explain.
    static func question(_ context: Context) -> [LLMMessage] {
        let system = [
            "あなたは好奇心旺盛な高校生の「生徒役」です。これから相手(先生役)に、あるテーマを説明してもらいます。",
            "相手が説明を始めたくなるような質問を一つだけしてください。答えや解説は書かないでください。",
            "質問は自然な日本語で、1〜2文にしてください。",
        ]
        var lines = system
        if let subject = context.subject { lines.append("教科: \(subject)") }
        if let topic = context.topic { lines.append("単元: \(topic)") }
        lines.append("質問の難易度: \(context.difficulty) / 5 (1は基礎的な確認、5は応用・発展的な問い)")
        return [
            LLMMessage(role: .system, content: lines.joined(separator: "\n")),
            LLMMessage(role: .user, content: "最初の質問をしてください。"),
        ]
    }

    /// An instant question's chat title: its topic, else its subject.
    static func questionTitle(_ context: Context, language: Language) -> String {
        Phrase.instantQuestionChat(about: context.topic ?? context.subject ?? "").text(in: language)
    }

    /// A new chat's title: the message's start, at most 40 characters, cut at a space where one falls
    /// in its second half (Japanese text has none: then it is cut at 40).
    static func title(from message: String, language: Language = .default) -> String {
        let flat = message.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        guard flat.count > 40 else { return flat.isEmpty ? Phrase.untitledTurnChat.text(in: language) : flat }
        let head = String(flat.prefix(40))
        if let space = head.lastIndex(of: " "), head.distance(from: head.startIndex, to: space) >= 20 {
            return String(head[..<space])
        }
        return head
    }
}
