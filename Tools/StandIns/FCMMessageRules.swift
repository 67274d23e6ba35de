import Foundation

/// What FCM's HTTP v1 `messages:send` refuses with 400 INVALID_ARGUMENT (the `Message` resource of
/// the API reference): fields it does not know, values of the wrong type, reserved `data` keys, a
/// `ttl` that is no protobuf Duration or longer than four weeks, and a target other than exactly one
/// of `token`, `topic` and `condition`. Notification Hubs' `fcmv1` format is the same message
/// without a target, which the hub adds.
enum FCMMessageRules {
    /// A refused field, as Google names it in `BadRequest.fieldViolations`.
    struct Violation: Error, Equatable {
        let field: String
        let description: String
    }

    /// Checks a request body: `{"message": {...}}` and optionally `validate_only`.
    static func checkRequest(_ object: [String: Any], target: Bool = true) -> Violation? {
        if let unknown = unknownField(object, ["message", "validate_only", "validateOnly"], in: "") { return unknown }
        if let validate = object["validate_only"] ?? object["validateOnly"], !(validate is Bool) {
            return Violation(field: "validate_only", description: "must be a boolean")
        }
        guard let message = object["message"] as? [String: Any] else { return Violation(field: "message", description: "must be an object") }
        return checkMessage(message, target: target)
    }

    static func checkMessage(_ message: [String: Any], target: Bool) -> Violation? {
        let fields = [
            "name", "data", "notification", "android", "webpush", "apns", "fcm_options", "fcmOptions", "token", "topic", "condition",
        ]
        if let unknown = unknownField(message, fields, in: "message.") { return unknown }
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        if target {
            guard targets.count == 1 else {
                return Violation(field: "message", description: "exactly one of token, topic and condition, not \(targets.count)")
            }
            guard let value = message[targets[0]] as? String, !value.isEmpty else {
                return Violation(field: "message.\(targets[0])", description: "must be a non-empty string")
            }
        } else if let first = targets.first {
            return Violation(field: "message.\(first)", description: "the hub sets the target itself")
        }
        if let name = message["name"], !(name is String) { return Violation(field: "message.name", description: "must be a string") }
        if let data = message["data"], let violation = checkData(data, field: "message.data") { return violation }
        if let notification = message["notification"] {
            guard let notification = notification as? [String: Any] else {
                return Violation(field: "message.notification", description: "must be an object")
            }
            if let unknown = unknownField(notification, ["title", "body", "image"], in: "message.notification.") { return unknown }
            if let field = notification.first(where: { !($0.value is String) })?.key {
                return Violation(field: "message.notification.\(field)", description: "must be a string")
            }
        }
        if let android = message["android"] {
            guard let android = android as? [String: Any] else { return Violation(field: "message.android", description: "must be an object") }
            if let violation = checkAndroid(android) { return violation }
        }
        if let apns = message["apns"] {
            guard let apns = apns as? [String: Any] else { return Violation(field: "message.apns", description: "must be an object") }
            let fields = ["headers", "payload", "fcm_options", "fcmOptions", "live_activity_token", "liveActivityToken"]
            if let unknown = unknownField(apns, fields, in: "message.apns.") { return unknown }
            if let headers = apns["headers"] {
                guard let headers = headers as? [String: Any], headers.values.allSatisfy({ $0 is String }) else {
                    return Violation(field: "message.apns.headers", description: "must map header names to strings")
                }
            }
            if let payload = apns["payload"], !(payload is [String: Any]) {
                return Violation(field: "message.apns.payload", description: "must be an object")
            }
        }
        for field in ["webpush", "fcm_options", "fcmOptions"] where message[field] != nil && !(message[field] is [String: Any]) {
            return Violation(field: "message.\(field)", description: "must be an object")
        }
        return nil
    }

    /// `AndroidConfig`: `priority` an `AndroidMessagePriority`, `ttl` a Duration string.
    static func checkAndroid(_ android: [String: Any]) -> Violation? {
        let fields = [
            "collapse_key", "collapseKey", "priority", "ttl", "restricted_package_name", "restrictedPackageName", "data", "notification",
            "fcm_options", "fcmOptions", "direct_boot_ok", "directBootOk", "bandwidth_constrained_ok", "bandwidthConstrainedOk",
            "restricted_satellite_ok", "restrictedSatelliteOk",
        ]
        if let unknown = unknownField(android, fields, in: "message.android.") { return unknown }
        for field in ["collapse_key", "collapseKey", "restricted_package_name", "restrictedPackageName"]
        where android[field] != nil && !(android[field] is String) {
            return Violation(field: "message.android.\(field)", description: "must be a string")
        }
        if let priority = android["priority"] {
            guard let priority = priority as? String, ["NORMAL", "HIGH"].contains(priority.uppercased()) else {
                return Violation(field: "message.android.priority", description: "must be normal or high")
            }
        }
        if let ttl = android["ttl"] {
            guard let ttl = ttl as? String, let seconds = durationSeconds(ttl) else {
                return Violation(field: "message.android.ttl", description: #"must be a Duration string such as "3600s""#)
            }
            guard seconds <= 2_419_200 else { return Violation(field: "message.android.ttl", description: "must be at most four weeks") }
        }
        if let data = android["data"], let violation = checkData(data, field: "message.android.data") { return violation }
        for field in ["notification", "fcm_options", "fcmOptions"] where android[field] != nil && !(android[field] is [String: Any]) {
            return Violation(field: "message.android.\(field)", description: "must be an object")
        }
        for field in ["direct_boot_ok", "directBootOk", "bandwidth_constrained_ok", "bandwidthConstrainedOk", "restricted_satellite_ok", "restrictedSatelliteOk"]
        where android[field] != nil && !(android[field] is Bool) {
            return Violation(field: "message.android.\(field)", description: "must be a boolean")
        }
        return nil
    }

    /// `map<string, string>` whose keys are not reserved ("from", "notification", "message_type",
    /// or starting with "google" or "gcm").
    static func checkData(_ value: Any, field: String) -> Violation? {
        guard let data = value as? [String: Any] else { return Violation(field: field, description: "must be an object") }
        if let key = data.first(where: { !($0.value is String) })?.key {
            return Violation(field: "\(field)[\(key)]", description: "every data value must be a string")
        }
        if let key = data.keys.first(where: { ["from", "notification", "message_type"].contains($0) || $0.hasPrefix("google") || $0.hasPrefix("gcm") }) {
            return Violation(field: "\(field)[\(key)]", description: "is a reserved key")
        }
        return nil
    }

    /// A protobuf Duration in JSON: digits, up to nine fractional digits, then "s".
    static func durationSeconds(_ text: String) -> Double? {
        guard text.hasSuffix("s") else { return nil }
        let number = text.dropLast()
        let parts = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.allSatisfy(\.isASCIIDigitCharacter) else { return nil }
        if parts.count == 2 { guard (1...9).contains(parts[1].count), parts[1].allSatisfy(\.isASCIIDigitCharacter) else { return nil } }
        return Double(number)
    }

    private static func unknownField(_ object: [String: Any], _ known: [String], in prefix: String) -> Violation? {
        object.keys.sorted().first { !known.contains($0) }.map {
            Violation(field: "\(prefix)\($0)", description: #"Invalid JSON payload received. Unknown name "\#($0)": Cannot find field."#)
        }
    }
}

extension Character {
    fileprivate var isASCIIDigitCharacter: Bool { isASCII && isNumber }
}
