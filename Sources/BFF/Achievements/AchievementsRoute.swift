import BFFPlatform
import BFFWire
import Crypto
import Foundation
import Hummingbird
import NIOCore

/// `GET /api/v1/me/achievements` (getAchievements), served on the router directly as the chat list
/// is (docs/architecture.md#the-fast-path): through the generated server the answer cost 674 µs of
/// server CPU against the list's 296, and its p99 at 32 connections was 2.2–3.0× the list's
/// (`scripts/bench achievements`), most of it `JSONEncoder` writing eight trophies. Same contract,
/// store and errors; the generated `getAchievements` is the reference its output is tested against.
struct AchievementsRoute: NativeRoute {
    static let method = HTTPRequest.Method.get
    static let path = "/api/v1/me/achievements"

    let achievements: AchievementStore

    func respond(to request: Request, context: AppRequestContext) async throws -> Response {
        let principal = try context.principal()
        let record = try await achievements.read(userID: principal.userID)
        let language = context.answerLanguage(readAlong: record.language)
        let body = record.json(in: language)
        let tag = AchievementsRecord.entityTag(of: body)
        var headers: HTTPFields = [.eTag: tag, .cacheControl: APIService.achievementsCaching, .vary: "Accept-Language"]
        if let asked = request.headers[.ifNoneMatch], APIService.matches(asked, tag) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.contentLanguage] = language.rawValue
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
    }
}

extension AchievementsRecord {
    /// The answer in `language`, written as `Components.Schemas.Achievements` encodes it: every
    /// trophy of the rules in their order, `unlocked_at` left out while locked.
    func json(in language: Language) -> ByteBuffer {
        var json = JSONWriter(capacity: 1_024)
        json.raw(#"{"streak":{"current":"#)
        json.integer(currentStreak)
        json.raw(#","longest":"#)
        json.integer(longestStreak)
        json.raw(todayDone ? #","today_done":true},"totals":{"turns":"# : #","today_done":false},"totals":{"turns":"#)
        json.integer(turns)
        json.raw(#","evaluated_chats":"#)
        json.integer(evaluatedChats)
        json.raw(#","recalls_completed":"#)
        json.integer(recallsCompleted)
        json.raw(#"},"subjects":["#)
        for (index, subject) in subjects.enumerated() {
            json.raw(index == 0 ? #"{"subject_id":"# : #",{"subject_id":"#)
            json.string(subject.subjectID)
            json.raw(#","mastered":"#)
            json.integer(subject.mastered)
            json.raw(#","total":"#)
            json.integer(subject.total)
            json.raw("}")
        }
        json.raw(#"],"trophies":["#)
        for (index, rule) in AchievementRules.all.enumerated() {
            let unlockedAt = unlocked[rule.trophy.rawValue]
            json.raw(index == 0 ? #"{"code":"# : #",{"code":"#)
            json.string(rule.trophy.rawValue)
            json.raw(#","name":"#)
            json.string(Phrase.trophyName(rule.trophy).text(in: language))
            if let unlockedAt, let micros = RFC3339.micros(unlockedAt) {
                json.raw(#","unlocked_at":"#)
                json.timestamp(micros: micros)
            }
            json.raw(#","progress":{"current":"#)
            json.integer(unlockedAt == nil ? min(value(of: rule.metric), rule.target) : rule.target)
            json.raw(#","target":"#)
            json.integer(rule.target)
            json.raw("}}")
        }
        json.raw("]}")
        return json.buffer
    }

    /// A strong tag of the answer: its bytes (their language included), hashed.
    static func entityTag(of body: ByteBuffer) -> String {
        let digest = SHA256.hash(data: body.readableBytesView)
        var tag = "\""
        tag.reserveCapacity(26)
        for byte in digest.prefix(12) {
            tag.unicodeScalars.append(Self.hex[Int(byte >> 4)])
            tag.unicodeScalars.append(Self.hex[Int(byte & 0x0F)])
        }
        return tag + "\""
    }

    private static let hex: [Unicode.Scalar] = Array("0123456789abcdef".unicodeScalars)
}
