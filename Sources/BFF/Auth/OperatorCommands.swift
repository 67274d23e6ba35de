import BFFPlatform
import Foundation

/// Operator tools behind `bff auth …`: a real token pair for support and contract tests, and
/// revocation for a suspected leak.
extension Commands {
    public struct IssuedPair: Sendable {
        public let accessToken: String
        public let refreshToken: String
        public let json: String
    }

    /// Signs a pair for `userID` on `deviceID`; a user unknown to this database is created as an
    /// operator-made account (issuer `urn:bff:operator`) so tests can start from an empty database.
    public static func issueToken(environment: [String: String], userID: UUID, deviceID: String, scopes: [String]) async throws -> IssuedPair {
        try await issueTokens(environment: environment, for: [(userID, deviceID)], scopes: scopes)[0]
    }

    /// `issueToken` for many (user, device) pairs on one pool, `concurrency` at a time; the results
    /// are in the order asked.
    public static func issueTokens(
        environment: [String: String], for targets: [(userID: UUID, deviceID: String)], scopes: [String], concurrency: Int = 1
    ) async throws -> [IssuedPair] {
        if let invalid = targets.first(where: { !AuthService.validDeviceID($0.deviceID) }) {
            throw ConfigurationError("--device", "\(invalid.deviceID) must be 8-128 characters of A-Z a-z 0-9 . _ : -")
        }
        let unknown = scopes.filter { !AccessTokens.allScopes.contains($0) }
        guard unknown.isEmpty else { throw ConfigurationError("--scope", "names unknown scopes \(unknown)") }
        // In the canonical order, once each: every scope, however listed, is the family's NULL and the
        // tokens' `hasEveryScope`.
        let scopes = AccessTokens.allScopes.filter(scopes.contains)
        guard !scopes.isEmpty else { throw ConfigurationError("--scope", "names no scope") }
        // The database and the signing keys: no IdP, no feature.
        let base = try operatorServices(environment: environment)
        let tokens = try TokenConfiguration(EnvironmentReader(environment))
        let auth = SessionIssuer(
            base, tokens: tokens,
            accessTokens: AccessTokens(keyRing: tokens.jwtKeys, issuer: tokens.jwtIssuer, audience: tokens.jwtAudience, lifetime: tokens.accessLifetime),
            revokedSessions: RevokedSessions(accessTokenLifetime: tokens.accessLifetime), logger: base.logger)
        let pairs = try await withDatabase(base.database) { client in
            // A schema behind this build is "run bff migrate", not a missing column's error.
            try await base.migrator.requireCurrent(client: client)
            return try await withThrowingTaskGroup(of: (Int, TokenPair).self) { group in
                @Sendable func issue(_ index: Int) async throws -> (Int, TokenPair) {
                    let (userID, deviceID) = targets[index]
                    _ = try await client.query(
                        """
                        INSERT INTO users (id, issuer, subject) VALUES (\(userID), 'urn:bff:operator', \(userID.uuidString.lowercased()))
                        ON CONFLICT (id) DO NOTHING
                        """)
                    guard let user = try await auth.identity.user(id: userID) else { throw ConfigurationError("--user", "does not exist") }
                    try await auth.signIn(userID, on: deviceID)
                    let refresh = try await auth.refreshTokens.startFamily(
                        // The operator's issue is this session's authentication: it counts as a login made now.
                        userID: userID, deviceID: deviceID, idpSessionID: nil, scopes: scopes, authTime: Date())
                    return (index, auth.pair(for: refresh, user: user))
                }
                var results = [TokenPair?](repeating: nil, count: targets.count)
                var next = 0
                while next < min(max(concurrency, 1), targets.count) {
                    group.addTask { [next] in try await issue(next) }
                    next += 1
                }
                while let (index, pair) = try await group.next() {
                    results[index] = pair
                    if next < targets.count {
                        group.addTask { [next] in try await issue(next) }
                        next += 1
                    }
                }
                return results.compactMap { $0 }
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try pairs.map { pair in
            let json = String(decoding: try encoder.encode(pair.schema), as: UTF8.self)
            return IssuedPair(accessToken: pair.accessToken, refreshToken: pair.refreshToken, json: json)
        }
    }

    /// Revokes every session of a user or of a device; returns how many families were revoked.
    public static func revoke(environment: [String: String], userID: UUID?, deviceID: String?) async throws -> Int {
        // The database alone (no migrations folder needed): the one service this tool builds.
        let database = try operatorDatabase(environment: environment)
        let route = try BaseConfiguration(environment: environment).pushRoute
        let identity = IdentityStore(database: database, installations: InstallationMirror(route: route))
        return try await withDatabase(database) { _ in
            if let userID { return try await identity.revokeUser(userID: userID, reason: "operator") }
            if let deviceID { return try await identity.revokeDevice(deviceID: deviceID, reason: "operator") }
            return 0
        }
    }
}
