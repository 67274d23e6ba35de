import BFFAPI
import BFFPlatform
import Foundation

/// The identity operations of the contract: thin adapters over `AuthService`.
extension APIService {
    func authStart(_ input: Operations.AuthStart.Input) async throws -> Operations.AuthStart.Output {
        // `code_challenge_method` is S256 or the generated decoder has refused the request.
        let login = try await auth.start(
            deviceID: input.query.deviceId, redirectURI: input.query.redirectUri, codeChallenge: input.query.codeChallenge,
            reauthenticate: input.query.reauthenticate ?? false)
        return .ok(.init(body: .json(.init(authorizationUrl: login.url, state: login.state, expiresAt: login.expiresAt))))
    }

    func authCallback(_ input: Operations.AuthCallback.Input) async throws -> Operations.AuthCallback.Output {
        let pair = try await auth.callback(code: input.query.code, state: input.query.state, codeVerifier: input.query.codeVerifier)
        // Tokens must not be kept by any cache (RFC 6749 §5.1).
        return .ok(.init(headers: .init(cacheControl: .noStore), body: .json(pair.schema)))
    }

    func authRefresh(_ input: Operations.AuthRefresh.Input) async throws -> Operations.AuthRefresh.Output {
        guard case .json(let body) = input.body else { throw APIError.validation("body", .mustBeJSON) }
        let pair = try await auth.refresh(token: body.refreshToken, deviceID: body.deviceId)
        return .ok(.init(headers: .init(cacheControl: .noStore), body: .json(pair.schema)))
    }

    func authLogout(_ input: Operations.AuthLogout.Input) async throws -> Operations.AuthLogout.Output {
        let principal = try AppRequestContext.principal()
        try await auth.logout(principal)
        return .noContent(.init())
    }

    func authBackchannelLogout(_ input: Operations.AuthBackchannelLogout.Input) async throws -> Operations.AuthBackchannelLogout.Output {
        guard case .urlEncodedForm(let form) = input.body else { throw APIError.validation("body", .mustBeForm) }
        try await auth.backchannelLogout(form.logoutToken)
        return .ok(.init(headers: .init(cacheControl: .noStore)))
    }

    func getMe(_ input: Operations.GetMe.Input) async throws -> Operations.GetMe.Output {
        let principal = try AppRequestContext.principal()
        guard let user = try await auth.identity.user(id: principal.userID) else {
            throw APIError.invalidToken(.accountGone)
        }
        let subscription = try await subscriptions.view(userID: principal.userID)
        return .ok(
            .init(
                body: .json(
                    .init(
                        id: user.id.uuidString.lowercased(), email: user.email, displayName: user.displayName,
                        plan: .init(rawValue: subscription.entitlement.plan.rawValue) ?? .free, subscription: subscription.granting?.schema))))
    }

    func listDevices(_ input: Operations.ListDevices.Input) async throws -> Operations.ListDevices.Output {
        let principal = try AppRequestContext.principal()
        let devices = try await auth.identity.devices(userID: principal.userID)
        // The web's session has no device: none of the list is the caller's.
        let current = principal.deviceID
        return .ok(
            .init(
                body: .json(
                    .init(
                        items: devices.map { device in
                            .init(
                                deviceId: device.deviceID, model: device.model, osVersion: device.osVersion, appVersion: device.appVersion,
                                lastSeenAt: device.lastSeenAt, current: device.deviceID == current)
                        }))))
    }

    func deleteDevice(_ input: Operations.DeleteDevice.Input) async throws -> Operations.DeleteDevice.Output {
        let principal = try AppRequestContext.principal()
        let deviceID = input.path.deviceId
        try AuthService.requireDeviceID(deviceID)
        guard try await auth.reportLost(deviceID: deviceID, of: principal.userID) else { throw APIError.notFound }
        auth.logger.info("lost device reported", metadata: ["user_id": .string(principal.userID.uuidString)])
        return .noContent(.init())
    }
}

extension AuthRefusal: DomainError {
    var apiError: APIError {
        switch self {
        case .invalid(let field, let problem): APIError.validation(field, problem)
        case .unregisteredRedirectURI: APIError(.invalidRedirectURI)
        case .unknownLogin: APIError(.invalidState)
        case .verifierMismatch: APIError(.invalidGrant)
        case .loginRejected: APIError(.idpRejected)
        case .logoutTokenRejected: APIError(.invalidLogoutToken)
        case .idpUnavailable: APIError(.idpUnavailable)
        }
    }
}

extension RefreshRefusal: DomainError {
    var apiError: APIError {
        switch self {
        // A token from another device is answered as an unknown one: it tells a thief nothing.
        case .unknown, .deviceMismatch: APIError(.invalidRefreshToken)
        case .expired: APIError(.refreshExpired)
        case .revoked: APIError(.sessionRevoked)
        case .reused: APIError(.refreshReused)
        case .rateLimited(let retryAfter): APIError.rateLimited(retryAfter: retryAfter, .sessionRefreshes)
        }
    }
}

extension TokenPair {
    var schema: Components.Schemas.TokenPair {
        .init(
            accessToken: accessToken, tokenType: .bearer, expiresIn: expiresIn, refreshToken: refreshToken,
            refreshExpiresIn: refreshExpiresIn,
            user: .init(id: user.id.uuidString.lowercased(), email: user.email, displayName: user.displayName))
    }
}
