import AsyncHTTPClient
import BFFPlatform
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOSSL
import OpenAPIRuntime
import PostgresNIO
import ServiceLifecycle

/// What `bff serve` owns, each built once on top of the job worker's `FeatureServices`: the signing
/// keys, the sign-in service (the IdP client's discovery and key caches), the chat store (the chat
/// list's first-page batcher), the remote configuration and the contract it serves.
public struct AppDependencies: Sendable {
    public let configuration: AppConfiguration
    public let features: FeatureServices
    public let accessTokens: AccessTokens
    public let revokedSessions: RevokedSessions
    let auth: AuthService
    /// The web's session cookie; nil without `BFF_WEB_AUTH_SECRET`.
    let webSessions: WebSessions?
    let chats: ChatStore
    /// The remote app configuration, re-read when its file changes.
    let remoteConfig: RemoteConfigSource
    let health: HealthHandlers
    let chatCreation: ChatCreation
    let settings: SettingsStore
    let catalogue: CatalogueStore
    let pushTokens: PushTokenStore
    let recallStore: RecallStore
    let turns: ChatTurn
    let purchases: PurchaseVerification
    let inbox: RevenueCatInbox
    let accountDeletion: AccountDeletion
    let accountExport: AccountExport
    let sightings: DeviceSightings
    let learnerLanguages: LearnerLanguages
    /// The contract, as `GET /openapi.yaml` serves it; nil when its file cannot be read.
    let openAPIDocument: Data?
    /// Passed by `bff serve` during a drain, before the grace period ends (`DrainDeadline.Clock`).
    public let drain: DrainDeadline

    public var base: BaseServices { features.base }
    public var database: Database { features.base.database }
    public var migrator: Migrator { features.base.migrator }
    public var logger: Logger { features.base.logger }

    public init(configuration: AppConfiguration, logger: Logger) async throws {
        let base = try BaseServices(configuration: configuration.base, logger: logger)
        try self.init(configuration: configuration, features: try FeatureServices(base: base, configuration: configuration.features))
    }

    init(configuration: AppConfiguration, features: FeatureServices) throws {
        self.configuration = configuration
        self.features = features
        let drain = DrainDeadline()
        self.drain = drain
        let database = features.base.database
        let logger = features.base.logger
        let tokens = configuration.tokens
        accessTokens = AccessTokens(keyRing: tokens.jwtKeys, issuer: tokens.jwtIssuer, audience: tokens.jwtAudience, lifetime: tokens.accessLifetime)
        revokedSessions = RevokedSessions(accessTokenLifetime: tokens.accessLifetime)
        auth = AuthService(
            sessions: SessionIssuer(features.base, tokens: tokens, accessTokens: accessTokens, revokedSessions: revokedSessions, logger: logger),
            redirectURIs: configuration.oidcRedirectURIs,
            oidc: OIDCClient(issuer: configuration.oidcIssuer, clientID: configuration.oidcClientID, clientSecret: configuration.oidcClientSecret))
        webSessions = WebSessions(
            configuration: configuration.webSession, issuer: auth.oidc.issuer, identity: features.base.identity, revoked: revokedSessions)
        chats = ChatStore(database: database, firstPages: FirstPageBatcher(database: database), recalls: features.recalls)
        remoteConfig = try RemoteConfigSource(path: configuration.appConfigFile, logger: logger)
        health = HealthHandlers(features.base)
        chatCreation = ChatCreation(database: database, repository: chats)
        settings = SettingsStore(database: database, recalls: features.recalls)
        learnerLanguages = LearnerLanguages(settings: settings)
        catalogue = CatalogueStore(database: database)
        let installations = InstallationMirror(route: configuration.base.pushRoute)
        pushTokens = PushTokenStore(database: database, installations: installations)
        recallStore = RecallStore(database: database, scheduler: features.recalls)
        let subscriptions = features.subscriptionSync.store
        turns = ChatTurn(
            turns: TurnStore(database: database, logger: logger), llm: features.llm,
            quota: TurnQuota(subscriptions: subscriptions, limits: configuration.planLimits), drain: drain, logger: logger)
        purchases = PurchaseVerification(sync: features.subscriptionSync, limiter: features.base.limiter)
        inbox = RevenueCatInbox(database: database, logger: logger)
        accountDeletion = AccountDeletion(
            database: database, revokedSessions: revokedSessions, removesStoreCustomer: configuration.features.subscriptions.apiKey != nil,
            logger: logger, installations: installations)
        accountExport = AccountExport(database: database, logger: logger)
        sightings = DeviceSightings(database: database, logger: logger)
        openAPIDocument = FileManager.default.contents(atPath: configuration.openAPIFile)
        if openAPIDocument == nil {
            logger.warning("the contract file cannot be read; GET /openapi.yaml answers 404", metadata: ["file": .string(configuration.openAPIFile)])
        }
    }
}

/// The process's logger. Services handed it at start-up (authentication, refresh tokens) log from
/// within requests too: the request's id and the trace's come from the task's context, so those
/// lines carry them.
public func makeLogger(level: Logger.Level, sink: JSONLogSink = .standardOutput) -> Logger {
    let provider = Logger.MetadataProvider {
        var metadata: Logger.Metadata = AppRequestContext.current.map { ["request_id": .string($0.requestID)] } ?? [:]
        if Telemetry.isTracing { metadata.merge(Telemetry.logMetadata.get()) { $1 } }
        return metadata
    }
    var logger = Logger(label: "bff") { label in
        var handler = JSONLogHandler(label: label, level: level, sink: sink)
        handler.metadataProvider = provider
        return handler
    }
    logger.logLevel = level
    return logger
}

/// Builds the HTTP application around `buildRouter`: the server (TLS when configured), the
/// database pools, the admin listener and the job worker, housekeeping and revocation services. The server refuses to start on a
/// schema behind this build, or when it cannot read the revoked sessions.
/// `extraRoutes` lets the tests add routes behind the same middleware, each with its operation.
func buildApplication(
    _ dependencies: AppDependencies,
    extraRoutes: [(operation: Operation, register: (Router<AppRequestContext>) -> Void)] = []
) throws -> some ApplicationProtocol {
    let configuration = dependencies.configuration
    let router = try buildRouter(dependencies, extraRoutes: extraRoutes)
    let server: HTTPServerBuilder
    let http = HTTP1Channel.Configuration(idleTimeout: .nanoseconds(configuration.httpIdleTimeout.nanoseconds))
    if let certificate = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try loadPEM("BFF_TLS_CERT", certificate, as: "certificate chain") {
                try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) }
            },
            privateKey: .privateKey(try loadPEM("BFF_TLS_KEY", key, as: "private key") { try NIOSSLPrivateKey(file: key, format: .pem) }))
        tls.minimumTLSVersion = .tlsv13
        server = try .tls(.http1(configuration: http), tlsConfiguration: tls)
    } else {
        server = .http1(configuration: http)
    }

    var app = Application(
        router: router,
        server: server,
        configuration: .init(
            address: .hostname(configuration.httpHost, port: configuration.httpPort), serverName: nil,
            availableConnectionsDelegate: ConnectionLimit(maximum: configuration.httpMaxConnections, logger: dependencies.logger)),
        logger: dependencies.logger)
    for client in dependencies.database.clients { app.addServices(client) }
    let started = StartupGate()
    let process = configuration.process
    if process.jobs.concurrency > 0 {
        app.addServices(dependencies.features.jobs(retention: process.jobs.retention).worker(dependencies.base, configuration: process.jobs, started: started))
    }
    let readiness = dependencies.health.readiness
    app.addServices(HealthSampler(readiness: readiness))
    if let admin = process.admin {
        app.addServices(AdminListener.application(admin, readiness: readiness, logger: dependencies.logger))
    }
    let revocations = RevocationWatcher(dependencies: dependencies)
    app.addServices(revocations)
    app.beforeServerStarts {
        try await dependencies.database.waitUntilReachable(configuration.base.database)
        try await dependencies.migrator.requireCurrent(client: dependencies.database.client)
        // No request is served before the revocations an unexpired access token may belong to are known.
        try await revocations.poll()
        started.open()
    }
    return app
}

/// The routes and their middleware, in the order of a request's life. The first step resolves the
/// operation the router matched and puts its policy on the context (`OperationTable`); every later
/// step reads that policy, none reads the path. Only the steps that treat every request alike come
/// before a request no operation takes is refused (404/405).
func buildRouter(
    _ dependencies: AppDependencies,
    extraRoutes: [(operation: Operation, register: (Router<AppRequestContext>) -> Void)] = []
) throws -> Router<AppRequestContext> {
    let configuration = dependencies.configuration
    let router = Router(context: AppRequestContext.self)
    let clientAddress = ClientAddress(trustedProxies: configuration.trustedProxies)
    let routes = RouteTableBox()
    // One statically typed stack (Hummingbird's middleware builder), not seventeen `add` calls:
    // each of those is an existential with its own responder closure, and the chain is the
    // floor every request pays (scripts/bench list's 404).
    let hsts = configuration.tlsCertificatePath != nil
    router.addMiddleware {
        OperationResolutionMiddleware(operations: OperationIndex(OperationTable.all + extraRoutes.map(\.operation)))
        StreamedAnswerTaskMiddleware()
        RequestTracingMiddleware(trustIncoming: configuration.traceTrustIncoming)
        RequestIDMiddleware()
        RequestMetricsMiddleware()
        UntrustedForwardingWarning(clientAddress: clientAddress, logger: dependencies.logger)
        CORSMiddleware(allowedOrigins: configuration.corsOrigins)
        UnreadBodyMiddleware()
        ErrorMiddleware()
        UnroutedRefusalMiddleware(routes: routes)
        if hsts {
            HSTSMiddleware()
        }
        ServiceGateMiddleware(config: dependencies.remoteConfig)
        UnescapedHeadersMiddleware()
        WebhookAuthorizationMiddleware(expected: configuration.features.subscriptions.webhookAuthorization)
        AuthenticationMiddleware(
            tokens: dependencies.accessTokens, revoked: dependencies.revokedSessions, webSessions: dependencies.webSessions,
            allowedOrigins: configuration.corsOrigins)
        LearnerLanguageMiddleware(languages: dependencies.learnerLanguages)
        AcceptMiddleware()
        RateLimitMiddleware(
            limiter: dependencies.base.limiter, loginPerAddress: configuration.authRateLimit,
            loginPerDevice: configuration.authDeviceRateLimit, clientAddress: clientAddress)
        BodyLimitMiddleware(limit: configuration.bodyLimit, readTimeout: configuration.bodyReadTimeout, logger: dependencies.logger)
        ClientIdentityMiddleware(sightings: dependencies.sightings)
        OpenAPIContextMiddleware()
    }

    // The API reference: its two routes answer 404, which FileMiddleware turns into the file asked
    // for when BFF_API_DOCS_DIR holds it (it takes Hummingbird's HTTPError only).
    let reference = router.group(RouterPath(OperationTable.apiReferencePath))
    if let docs = configuration.apiDocsDirectory {
        reference.add(
            middleware: FileMiddleware(docs, urlBasePath: OperationTable.apiReferencePath, searchForIndexHtml: true, logger: dependencies.logger))
    }
    reference.get("") { _, _ -> Response in throw HTTPError(.notFound) }
    reference.get("**") { _, _ -> Response in throw HTTPError(.notFound) }

    for route in extraRoutes { route.register(router) }
    let native: [any NativeRoute] = [
        ChatListRoute(chats: dependencies.chats), dependencies.accountExport,
        AchievementsRoute(achievements: dependencies.features.achievements),
    ]
    for route in native { route.register(on: router) }
    let transport = RecordingTransport(router: router, routes: routes, servedNatively: native.map(\.operation))
    try APIService(dependencies: dependencies).registerHandlers(
        on: transport, configuration: .init(dateTranscoder: RFC3339Dates(), jsonEncodingOptions: [.withoutEscapingSlashes]))
    try transport.requireEveryOperation()
    return router
}
