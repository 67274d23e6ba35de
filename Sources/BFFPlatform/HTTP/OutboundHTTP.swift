import AsyncHTTPClient
import Foundation
import Instrumentation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Tracing

/// `BFF_OUTBOUND_CA_FILE`: PEM certificates every outbound HTTPS client trusts besides the system's.
public struct OutboundHTTPConfiguration: Sendable {
    public var extraCAFile: String?

    public init(extraCAFile: String? = nil) {
        self.extraCAFile = extraCAFile
    }

    package init(_ reader: EnvironmentReader) throws {
        extraCAFile = reader.optional("BFF_OUTBOUND_CA_FILE")
        if let extraCAFile, !FileManager.default.isReadableFile(atPath: extraCAFile) {
            throw ConfigurationError("BFF_OUTBOUND_CA_FILE", "\(extraCAFile) is not a readable file")
        }
    }
}

/// The process's clients for the services it calls (push services, the LLM): the system's roots plus
/// `BFF_OUTBOUND_CA_FILE` (tests' local services, an operator's TLS-inspecting proxy), HTTP/2 where
/// the service offers it (APNs requires it), no redirects (nothing is re-sent elsewhere), bounded
/// connects, and a read timeout between two reads of a response (an LLM's stream may pause longer
/// than a push service may take to answer).
package enum OutboundHTTP {
    /// One client per CA file and read timeout for the life of the process (a client must be shut
    /// down before it is released, and a process's services share it until exit).
    private static let clients = NIOLockedValueBox<[String: HTTPClient]>([:])

    package static func client(extraCAFile: String?, readTimeout: Duration = .seconds(15)) throws -> HTTPClient {
        try clients.withLockedValue { clients in
            let key = "\(readTimeout.components.seconds) \(extraCAFile ?? "")"
            if let client = clients[key] { return client }
            let client = try makeClient(extraCAFile: extraCAFile, readTimeout: readTimeout)
            clients[key] = client
            return client
        }
    }

    private static func makeClient(extraCAFile: String?, readTimeout: Duration) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let extraCAFile {
            tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(extraCAFile))]
        }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow, timeout: .init(connect: .seconds(5), read: .nanoseconds(readTimeout.nanoseconds)))
        configuration.httpVersion = .automatic
        // Over HTTP/1.1 an LLM's streamed reply holds its connection for the whole reply: the default
        // of 8 connections per host would queue the ninth learner's turn behind the others.
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 1_024)
        return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration.untraced)
    }
}

extension HTTPClient {
    /// `execute` in a client span named `span` ("revenuecat subscriber"), the request carrying the
    /// span's W3C `traceparent`. The span ends with the response head: the caller reads the body. It
    /// records the method, host and status, never the URL (APNs' holds a device token, RevenueCat's
    /// a user id). The clients' own tracing is off (`untraced`), which would record the URL.
    package func execute(_ request: HTTPClientRequest, deadline: NIODeadline, span name: String) async throws -> HTTPClientResponse {
        guard Telemetry.isTracing else { return try await execute(request, deadline: deadline) }
        let attributes: SpanAttributes = [
            "http.request.method": .string(request.method.rawValue),
            "server.address": .string(URL(string: request.url)?.host ?? ""),
        ]
        return try await Telemetry.span(name, kind: .client, attributes: attributes) { span in
            var request = request
            InstrumentationSystem.instrument.inject(span.context, into: &request.headers, using: HTTPHeadersInjector())
            let response = try await execute(request, deadline: deadline)
            span.attributes["http.response.status_code"] = Int(response.status.code)
            if response.status.code >= 500 { span.setStatus(.init(code: .error)) }
            return response
        }
    }

    package func execute(_ request: HTTPClientRequest, timeout: TimeAmount, span name: String) async throws -> HTTPClientResponse {
        try await execute(request, deadline: .now() + timeout, span: name)
    }
}

extension HTTPClient.Configuration {
    /// Without async-http-client's own spans: `execute(_:deadline:span:)` makes them.
    package var untraced: Self {
        var copy = self
        copy.tracing.tracer = nil
        return copy
    }
}

/// Injects `traceparent` only: a `tracestate` is vendor data, possibly a client's, and the services
/// called (Apple, Google, RevenueCat, the LLM) are third parties.
private struct HTTPHeadersInjector: Injector {
    func inject(_ value: String, forKey name: String, into headers: inout HTTPHeaders) {
        guard name.lowercased() != "tracestate" else { return }
        headers.replaceOrAdd(name: name, value: value)
    }
}
