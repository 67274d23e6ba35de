// swift-tools-version:6.2
import PackageDescription

// One product of each transitive package pinned below (`dependencies:`) that SwiftPM would otherwise
// call "not used by any target". Each is already compiled into `bff` through the packages BFF uses,
// so naming it adds nothing to the build.
let pinnedTransitiveProducts: [Target.Dependency] = [
    .product(name: "Algorithms", package: "swift-algorithms"),
    .product(name: "SwiftASN1", package: "swift-asn1"),
    .product(name: "Atomics", package: "swift-atomics"),
    .product(name: "ExtrasBase64", package: "swift-extras-base64"),
    .product(name: "NIOExtras", package: "swift-nio-extras"),
    .product(name: "NIOHTTP2", package: "swift-nio-http2"),
    .product(name: "NIOTransportServices", package: "swift-nio-transport-services"),
    .product(name: "RealModule", package: "swift-numerics"),
    .product(name: "ServiceContextModule", package: "swift-service-context"),
    .product(name: "SystemPackage", package: "swift-system"),
    .product(name: "W3CTraceContext", package: "swift-w3c-trace-context"),
    // Yams (only the OpenAPI generator's build tool uses it) and the structured headers (only parts of
    // swift-nio-extras that nothing here links) are compiled into no target: named for a platform this
    // package is never built for, they count as used and are still never compiled.
    .product(name: "Yams", package: "Yams", condition: .when(platforms: [.wasi])),
    .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers", condition: .when(platforms: [.wasi])),
]

let package = Package(
    name: "bff",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "bff", targets: ["bff"])
    ],
    // Every package of the resolved graph is pinned to one version with `exact:`, the transitive ones
    // too: Package.resolved cannot be committed here (it is gitignored: the package mirror of the
    // development machines has commit ids of its own), so without these a clean checkout, CI and the
    // image would each resolve whatever newer release `from:` allows. An upgrade is a reviewed change
    // to this list. The image records what it was built from in /app/package-versions.txt.
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", exact: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird.git", exact: "2.1.0"),
        .package(url: "https://github.com/apple/swift-openapi-generator.git", exact: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", exact: "1.13.4"),
        .package(url: "https://github.com/vapor/postgres-nio.git", exact: "1.33.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", exact: "5.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", exact: "4.5.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", exact: "2.37.6"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", exact: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", exact: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", exact: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", exact: "2.13.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", exact: "1.21.1"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", exact: "1.7.3"),
        // OTLP over HTTP only: the default gRPC trait would about double the cold build.
        .package(url: "https://github.com/swift-otel/swift-otel.git", exact: "1.6.0", traits: ["OTLPHTTP"]),

        // Transitive: declared only to pin them (the URLs are spelled as the packages above spell them).
        .package(url: "https://github.com/mattpolzin/OpenAPIKit", exact: "6.4.0"),
        .package(url: "https://github.com/apple/swift-algorithms.git", exact: "1.2.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", exact: "1.7.4"),
        .package(url: "https://github.com/apple/swift-async-algorithms.git", exact: "1.1.4"),
        .package(url: "https://github.com/apple/swift-atomics.git", exact: "1.3.0"),
        .package(url: "https://github.com/apple/swift-collections.git", exact: "1.6.0"),
        .package(url: "https://github.com/apple/swift-configuration.git", exact: "1.4.0"),
        .package(url: "https://github.com/swift-extras/swift-extras-base64", exact: "1.2.0"),
        .package(url: "https://github.com/apple/swift-http-structured-headers.git", exact: "1.7.0"),
        .package(url: "https://github.com/apple/swift-http-types", exact: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", exact: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", exact: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-transport-services.git", exact: "1.28.0"),
        .package(url: "https://github.com/apple/swift-numerics.git", exact: "1.1.1"),
        .package(url: "https://github.com/apple/swift-protobuf.git", exact: "1.39.0"),
        .package(url: "https://github.com/apple/swift-service-context.git", exact: "1.5.1"),
        .package(url: "https://github.com/apple/swift-system", exact: "1.8.1"),
        .package(url: "https://github.com/swift-otel/swift-w3c-trace-context.git", exact: "1.0.0"),
        .package(url: "https://github.com/jpsim/Yams", exact: "6.2.2"),
    ],
    targets: [
        .target(
            name: "BFFAPI",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime")
            ],
            // The generator's output imports more than some files use; its warnings are not ours to fix.
            swiftSettings: [.unsafeFlags(["-suppress-warnings"])],
            plugins: [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        ),
        // The wire formats the hot paths read and write by hand (docs/architecture.md#the-fast-path): JSON, base64url, RFC 3339,
        // canonical UUIDs and PostgreSQL's binary cells and arrays. Nothing here knows the contract.
        .target(
            name: "BFFWire",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        // The layers, each a module so that the compiler enforces them (docs/architecture.md#the-layers):
        // BFFPlatform knows no feature (configuration, errors, database, HTTP middleware, observability);
        // BFFJobs is the job runtime and knows nothing of the app; BFF holds the features and the
        // composition root, and is the only one that knows the contract (BFFAPI).
        .target(
            name: "BFFPlatform",
            dependencies: [
                "BFFWire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
            ]
        ),
        .target(
            name: "BFFJobs",
            dependencies: [
                "BFFPlatform",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "BFF",
            dependencies: [
                "BFFAPI",
                "BFFWire",
                "BFFPlatform",
                "BFFJobs",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
            ] + pinnedTransitiveProducts
        ),
        .target(name: "CRuntimeHooks"),
        // Swift's global executor on NIO's event loops, installed by `bff` before its first task.
        .target(
            name: "EventLoopExecutor",
            dependencies: [
                "CRuntimeHooks",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "bff",
            dependencies: [
                "BFF",
                "BFFPlatform",
                "EventLoopExecutor",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Tools/: every fake and every tool, apart from what ships. Local stand-ins for the services the BFF
        // calls (APNs, FCM, Notification Hubs, an OpenAI-compatible LLM in both dialects, RevenueCat, an OTLP
        // collector) that speak their protocols and check what they receive: the tests' servers, the
        // benchmark's and scripts/dev's (push-stand-in, llm-stand-in, revenuecat-stand-in, otlp-stand-in), and
        // the benchmark's own commands (bff-bench). In the root package, not a package of their own: the tests
        // use the stand-ins, and a second package would depend on this one and this one's tests on it.
        .target(
            name: "StandIns",
            dependencies: [
                "BFFWire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tools/StandIns"
        ),
        .executableTarget(
            name: "llm-stand-in",
            dependencies: ["StandIns"],
            path: "Tools/llm-stand-in"
        ),
        .executableTarget(
            name: "push-stand-in",
            dependencies: ["StandIns", .product(name: "Logging", package: "swift-log")],
            path: "Tools/push-stand-in"
        ),
        .executableTarget(
            name: "otlp-stand-in",
            dependencies: [
                "StandIns",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Tools/otlp-stand-in"
        ),
        .executableTarget(
            name: "revenuecat-stand-in",
            dependencies: [
                "StandIns",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Tools/revenuecat-stand-in"
        ),
        .executableTarget(
            name: "bff-bench",
            dependencies: [
                "BFF", "BFFPlatform", "BFFWire", "EventLoopExecutor",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Tools/bff-bench"
        ),
        .testTarget(
            name: "BFFWireTests",
            dependencies: [
                "BFFWire",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "BFFTests",
            dependencies: [
                "BFF",
                "BFFPlatform",
                "BFFJobs",
                "BFFWire",
                "EventLoopExecutor",
                "StandIns",
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            // The Auth.js session vectors and the script that makes them: read from the checkout by
            // AuthJSSessionTokenTests (as openapi.yaml is), not bundled.
            exclude: ["Auth/Vectors"]
        ),
    ]
)
