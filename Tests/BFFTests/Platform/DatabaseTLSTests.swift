import Crypto
import Foundation
import NIOSSL
import PostgresNIO
import SwiftASN1
import Testing
import X509

@testable import BFF
@testable import BFFPlatform

/// `sslmode` against a PostgreSQL of the test's own that speaks TLS with a self-signed certificate
/// for `localhost`, as Debian's packaged server does out of the box.
@Suite("Database TLS", .needsDatabase, .timeLimit(.minutes(3)))
struct DatabaseTLSTests {
    @Test("sslmode as in libpq: prefer and require encrypt without checking, verify-ca and verify-full check against sslrootcert")
    func sslModes() async throws {
        let cluster = try ThrowawayCluster(name: "tls")
        try await cluster.run("init")
        do {
            try await Self.connectInEveryMode(cluster)
        } catch {
            try? await cluster.run("destroy")
            throw error
        }
        try await cluster.run("destroy")
    }

    private static func connectInEveryMode(_ cluster: ThrowawayCluster) async throws {
        let authority = try Self.selfSignedCertificate(into: cluster.dataDirectory)
        let conf = try String(contentsOfFile: "\(cluster.dataDirectory)/postgresql.conf", encoding: .utf8)
        try (conf + "\nlisten_addresses = 'localhost'\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n")
            .write(toFile: "\(cluster.dataDirectory)/postgresql.conf", atomically: false, encoding: .utf8)
        try await cluster.run("start")
        let base = "postgres://bff@localhost:\(cluster.port)/postgres"

        for mode in [
            "prefer", "require", "verify-ca&sslrootcert=\(authority)", "verify-full&sslrootcert=\(authority)",
            "require&sslrootcert=\(authority)",
        ] {
            #expect(try await Self.encrypted(try DatabaseURL(parsing: "\(base)?sslmode=\(mode)")), "\(mode)")
        }
        // The system's authorities do not know the server's certificate; nor does another one.
        let stranger = try Self.selfSignedCertificate(into: cluster.directory, name: "stranger")
        for mode in [
            "verify-full", "verify-full&sslrootcert=system", "verify-ca&sslrootcert=\(stranger)",
            "require&sslrootcert=\(stranger)",
        ] {
            await #expect("\(mode)") { try await Self.encrypted(try DatabaseURL(parsing: "\(base)?sslmode=\(mode)")) } throws: { error in
                Self.isCertificateRefusal(error)
            }
        }
        // verify-full checks the host name too: 127.0.0.1 is not the certificate's localhost.
        let byAddress = "postgres://bff@127.0.0.1:\(cluster.port)/postgres"
        #expect(try await Self.encrypted(try DatabaseURL(parsing: "\(byAddress)?sslmode=verify-ca&sslrootcert=\(authority)")))
        await #expect {
            try await Self.encrypted(try DatabaseURL(parsing: "\(byAddress)?sslmode=verify-full&sslrootcert=\(authority)"))
        } throws: { error in
            Self.isCertificateRefusal(error)
        }
        // As libpq: sslrootcert=system alone means verify-full, and with anything weaker it is refused,
        // as is a chain check without an authority of the operator's own.
        #expect(try DatabaseURL(parsing: "\(base)?sslrootcert=system").tls == .verifyFull)
        for refused in [
            "sslmode=verify-full&sslrootcert=/nonexistent.pem", "sslmode=allow", "sslmode=verify-ca",
            "sslmode=require&sslrootcert=system", "sslmode=prefer&sslrootcert=system", "sslmode=verify-ca&sslrootcert=system",
        ] {
            #expect(throws: ConfigurationError.self, "\(refused)") { try DatabaseURL(parsing: "\(base)?\(refused)") }
        }
    }

    /// A connection refused by the TLS handshake (the server's certificate was not trusted, or not
    /// for this host), not one refused for any other reason.
    private static func isCertificateRefusal(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError else { return false }
        return error.underlying is NIOSSLError || error.underlying is NIOSSLExtraError || error.underlying is BoringSSLError
    }

    /// Whether a connection made as the URL says is encrypted (one connection: a pool would retry).
    private static func encrypted(_ url: DatabaseURL) async throws -> Bool {
        let tls: PostgresConnection.Configuration.TLS =
            switch url.encryption {
            case (let configuration, required: false)?: .prefer(try NIOSSLContext(configuration: configuration))
            case (let configuration, required: true)?: .require(try NIOSSLContext(configuration: configuration))
            case nil: .disable
            }
        let configuration = PostgresConnection.Configuration(
            host: url.host, port: url.port, username: url.username, password: nil, database: url.database, tls: tls)
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: TestEnvironment.quietLogger)
        defer { Task { try? await connection.close() } }
        var ssl = false
        for try await value in try await connection.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", logger: TestEnvironment.quietLogger)
            .decode(Bool.self)
        { ssl = value }
        return ssl
    }

    /// A self-signed certificate for `localhost` and its key, written as `server.crt` and
    /// `server.key` (or `NAME.crt` alone) into `directory`, owned by the folder's owner, the key
    /// readable by it alone (PostgreSQL refuses it otherwise); returns the certificate's path.
    static func selfSignedCertificate(into directory: String, name: String = "server") throws -> String {
        let key = P256.Signing.PrivateKey()
        let subject = try DistinguishedName { CommonName("localhost") }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-3600), notValidAfter: Date().addingTimeInterval(86_400),
            issuer: subject, subject: subject,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                SubjectAlternativeNames([.dnsName("localhost")])
            },
            issuerPrivateKey: .init(key))
        let owner = try FileManager.default.attributesOfItem(atPath: directory)[.ownerAccountID]
        let certificatePath = "\(directory)/\(name).crt"
        try certificate.serializeAsPEM().pemString.write(toFile: certificatePath, atomically: false, encoding: .utf8)
        try FileManager.default.setAttributes([.ownerAccountID: owner as Any], ofItemAtPath: certificatePath)
        if name == "server" {
            let keyPath = "\(directory)/server.key"
            try key.pemRepresentation.write(toFile: keyPath, atomically: false, encoding: .utf8)
            try FileManager.default.setAttributes([.ownerAccountID: owner as Any, .posixPermissions: 0o600], ofItemAtPath: keyPath)
        }
        return certificatePath
    }
}
