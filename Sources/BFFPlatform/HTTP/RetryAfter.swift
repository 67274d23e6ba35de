import Foundation
import NIOHTTP1

/// How long a service asked us to wait: `retry-after-ms` (Azure OpenAI), else `Retry-After` in
/// seconds or as an HTTP date. Nil when it said nothing usable.
package enum RetryAfter {
    package static func parse(_ headers: HTTPHeaders, now: Date = Date()) -> Duration? {
        if let text = headers.first(name: "retry-after-ms"), let millis = Double(text), millis >= 0, millis < 86_400_000 {
            return .milliseconds(Int64(millis.rounded(.up)))
        }
        guard let text = headers.first(name: "retry-after")?.trimmingCharacters(in: .whitespaces) else { return nil }
        if let seconds = Int(text), seconds >= 0 { return .seconds(min(seconds, 86_400)) }
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.timeZone = TimeZone(identifier: "GMT")
        format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = format.date(from: text) else { return nil }
        return .seconds(max(0, min(Int(date.timeIntervalSince(now).rounded(.up)), 86_400)))
    }
}
