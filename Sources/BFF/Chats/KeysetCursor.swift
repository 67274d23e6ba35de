import BFFPlatform
import BFFWire
import Foundation

/// An opaque keyset position: the `(timestamp, id)` of the last item of a page, the list it belongs
/// to and the filter it was made under (the delta pull's `updated_since`, the messages' chat),
/// base64url-encoded. A cursor of another list or filter, or any edited string, is refused: a walk
/// continued under another `updated_since` would skip changes or repeat them.
struct KeysetCursor: Equatable {
    enum List: String { case newest = "n", delta = "d", messages = "m", recalls = "r" }

    let list: List
    /// Microseconds since 1970: exact, unlike a floating-point `Date`.
    let micros: Int64
    let id: UUID
    /// The filter, empty when the list has none.
    var filter: String = ""

    func encoded() -> String {
        let position = "\(list.rawValue):\(micros):\(id.uuidString.lowercased())"
        return Base64URL.encode(Array((filter.isEmpty ? position : "\(position):\(filter)").utf8))
    }

    static func decode(_ text: String, expecting list: List, filter: String = "") throws -> KeysetCursor {
        guard text.utf8.count <= 512, let bytes = Base64URL.decode(text) else { throw PageError.invalidCursor }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == (filter.isEmpty ? 3 : 4), parts[0] == list.rawValue, filter.isEmpty || parts[3] == filter,
            let micros = Int64(parts[1]), representable.contains(micros), let id = UUID(uuidString: String(parts[2]))
        else { throw PageError.invalidCursor }
        return KeysetCursor(list: list, micros: micros, id: id, filter: filter)
    }

    /// Years 1 to 9999: an edited cursor outside them would overflow PostgreSQL's interval arithmetic
    /// (a 500) instead of being refused.
    static let representable = RFC3339.representableMicros
}

enum PageLimit {
    static func resolve(_ limit: Int?, default fallback: Int, max: Int) throws -> Int {
        let value = limit ?? fallback
        guard (1...max).contains(value) else { throw PageError.limitOutOfRange(max: max) }
        return value
    }
}

/// A page asked for with a cursor this list did not make, or a limit it does not serve (the answers
/// are in `ChatHandlers.swift`; the recalls' list pages the same way).
enum PageError: Error, Equatable {
    case invalidCursor
    /// `limit` outside 1...`max`.
    case limitOutOfRange(max: Int)
}
