import BFFPlatform

/// An app's version as the stores number it: `MAJOR.MINOR.PATCH`, each a number of at most six
/// digits without a leading zero. Anything else (`1`, `1.2.3.4`, `01.2`) is not a version.
struct AppVersion: Sendable, Comparable, CustomStringConvertible {
    let parts: [Int]

    init?(_ text: some StringProtocol) {
        guard text.utf8.count <= 20 else { return nil }
        let pieces = text.split(separator: ".", omittingEmptySubsequences: false)
        guard pieces.count == 3 else { return nil }
        var parts: [Int] = []
        for piece in pieces {
            guard (1...6).contains(piece.utf8.count), piece.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                piece.utf8.count == 1 || piece.utf8.first != 0x30, let number = Int(piece)
            else { return nil }
            parts.append(number)
        }
        self.parts = parts
    }

    var description: String { parts.map(String.init).joined(separator: ".") }

    static func < (lhs: AppVersion, rhs: AppVersion) -> Bool { lhs.parts.lexicographicallyPrecedes(rhs.parts) }
    static func == (lhs: AppVersion, rhs: AppVersion) -> Bool { lhs.parts == rhs.parts }
}

/// What the app says about itself in `X-Client: <app>/<version> (<platform> <os version>; <model>)`,
/// e.g. `LearnApp/1.4.0 (iOS 17.5; iPhone15,2)`. Read leniently: a part that cannot be read is nil,
/// and nothing here ever fails a request.
struct ClientIdentity: Sendable, Equatable {
    enum Platform: String, Sendable { case ios, android }

    var version: AppVersion?
    var platform: Platform?
    var osVersion: String?
    var model: String?

    static func == (lhs: ClientIdentity, rhs: ClientIdentity) -> Bool {
        lhs.version?.parts == rhs.version?.parts && lhs.platform == rhs.platform && lhs.osVersion == rhs.osVersion && lhs.model == rhs.model
    }

    init(version: AppVersion?, platform: Platform?, osVersion: String?, model: String?) {
        self.version = version
        self.platform = platform
        self.osVersion = osVersion
        self.model = model
    }

    /// Nil when the header says nothing readable at all.
    init?(header: String?) {
        guard let header, header.utf8.count <= 512 else { return nil }
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        let product = trimmed.prefix { $0 != " " && $0 != "(" }
        if let slash = product.firstIndex(of: "/") {
            version = AppVersion(product[product.index(after: slash)...])
        }
        if let open = trimmed.firstIndex(of: "("), let close = trimmed.lastIndex(of: ")"), open < close {
            let inside = trimmed[trimmed.index(after: open)..<close]
            let fields = inside.split(separator: ";", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if let system = fields.first {
                let words = system.split(separator: " ", maxSplits: 1)
                switch words.first?.lowercased() {
                case "ios", "ipados": platform = .ios
                case "android": platform = .android
                default: break
                }
                osVersion = words.count > 1 ? Self.clean(String(words[1]), limit: 100) : nil
            }
            if fields.count > 1 { model = Self.clean(fields[1], limit: 200) }
        }
        if version == nil, platform == nil, osVersion == nil, model == nil { return nil }
    }

    /// Printable ASCII only, bounded: what a device row may keep.
    private static func clean(_ text: String, limit: Int) -> String? {
        let kept = String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(limit).map(Character.init))
            .trimmingCharacters(in: .whitespaces)
        return kept.isEmpty ? nil : kept
    }
}
