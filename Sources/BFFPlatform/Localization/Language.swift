import Foundation

/// A language the server answers in (requirements §2.3: Japanese, more later). Japanese is the
/// default; English the second. The raw value is the BCP 47 tag sent in `Content-Language` and
/// stored in `user_settings.language`.
public enum Language: String, Sendable, CaseIterable, Hashable {
    case ja
    case en

    public static let `default` = Language.ja

    /// The language an `Accept-Language` header (RFC 9110 §12.5.4) asks for: of the languages this
    /// server speaks, the one its ranges give the highest q-value, the earlier on a tie. A language
    /// range (`ja`, `ja-JP`, `en-US`) matches by its primary subtag; `*` matches each language no
    /// other range names; `q=0` refuses. Nil when the header asks for none of ours: the caller
    /// falls back to the learner's setting.
    public static func negotiate(_ header: String?) -> Language? {
        guard let header, !header.isEmpty else { return nil }
        var named: [Language: (q: Double, position: Int)] = [:]
        var wildcard: (q: Double, position: Int)?
        for (position, element) in header.split(separator: ",").enumerated() {
            let parts = element.split(separator: ";")
            guard let range = parts.first?.trimmingCharacters(in: .whitespaces).lowercased(), !range.isEmpty else { continue }
            var q = 1.0
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard pair.count == 2, pair[0].lowercased() == "q" else { continue }
                q = Double(pair[1]).flatMap { (0...1).contains($0) ? $0 : nil } ?? 0
            }
            if range == "*" {
                if q > (wildcard?.q ?? -1) { wildcard = (q, position) }
                continue
            }
            let primary = range.split(separator: "-", maxSplits: 1).first.map(String.init) ?? range
            guard let language = Language(rawValue: primary) else { continue }
            // The most specific range wins in RFC 4647; here every range of a language is as
            // specific as its primary subtag, so the highest q among them stands.
            if q > (named[language]?.q ?? -1) { named[language] = (q, position) }
        }
        var best: (language: Language, q: Double, position: Int)?
        for language in allCases {
            guard let (q, position) = named[language] ?? wildcard, q > 0 else { continue }
            if let current = best, q < current.q || (q == current.q && position >= current.position) { continue }
            best = (language, q, position)
        }
        return best?.language
    }
}
