import BFFAPI
import BFFPlatform
import Foundation

/// Push token registration (API-040 and the FCM token flow, docs/requirements.md).
extension APIService {
    func registerPushToken(_ input: Operations.RegisterPushToken.Input) async throws -> Operations.RegisterPushToken.Output {
        let principal = try AppRequestContext.principal()
        // Only an app's session has a device; the web's lacks push:register and is refused before this.
        guard let device = principal.deviceID else { throw APIError.insufficientScope([.pushRegister]) }
        guard case .json(let body) = input.body else { throw APIError.validation("body", .mustBeJSON) }
        let registration = try PushTokenRegistration(validating: body, sessionDevice: device)
        try await pushTokens.register(registration, userID: principal.userID)
        return .noContent(.init())
    }

    func unregisterPushToken(_ input: Operations.UnregisterPushToken.Input) async throws -> Operations.UnregisterPushToken.Output {
        let principal = try AppRequestContext.principal()
        guard case .json(let body) = input.body else { throw APIError.validation("body", .mustBeJSON) }
        try PushTokenRegistration.requireTokenShape(body.token)
        try await pushTokens.unregister(token: body.token, userID: principal.userID)
        return .noContent(.init())
    }
}

extension PushTokenRegistration {
    /// What the schema cannot say: the provider fits the platform and the token its provider, and the
    /// device is the session's (registering for another device would claim it, ending its sessions).
    init(validating body: Components.Schemas.PushRegistration, sessionDevice: String) throws {
        try Self.requireTokenShape(body.token)
        guard body.deviceId == sessionDevice else {
            throw APIError.validation("device_id", .notThisSessionsDevice)
        }
        let isAPNsShaped =
            (64...200).contains(body.token.utf8.count) && body.token.utf8.count % 2 == 0
            && body.token.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x46) || ($0 >= 0x61 && $0 <= 0x66) }
        let provider: Provider
        switch body.provider {
        case .apns?: provider = .apns
        case .fcm?: provider = .fcm
        case nil: provider = body.platform == .ios && isAPNsShaped ? .apns : .fcm
        default: throw APIError.validation("provider", .pushProviderChoice)
        }
        if provider == .apns {
            guard body.platform == .ios else { throw APIError.validation("provider", .apnsFromIOSOnly) }
            guard isAPNsShaped else { throw APIError.validation("token", .apnsTokenShape) }
        }
        self.init(token: body.token, platform: body.platform.rawValue, provider: provider, deviceID: body.deviceId)
    }

    /// The contract's token: 64-2048 characters of A-Z a-z 0-9 _ : - (the schema says so too; the
    /// check here keeps the database's index within its row size whatever the decoder lets through).
    static func requireTokenShape(_ token: String) throws {
        let bytes = token.utf8
        guard (64...2048).contains(bytes.count),
            bytes.allSatisfy({ ($0 >= 0x30 && $0 <= 0x3A) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F || $0 == 0x2D })
        else { throw APIError.validation("token", .fcmTokenShape) }
    }
}
