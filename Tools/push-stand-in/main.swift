// push-stand-in: local APNs, FCM and Notification Hubs servers for development and the benchmark. They
// speak each service's protocol and check what they receive (StandIns), but deliver nothing to a phone.
//
//   push-stand-in --dir DIR --cert FILE --key FILE [--apns-port P] [--fcm-port P] [--nh-port P] [--latency-ms N]
//
// Writes into DIR the APNs signing key, the FCM service account, `push.env`: the BFF_* lines that
// point a server at APNs and FCM (the direct route), and `nh.env`: the lines that select the
// Notification Hubs route against the local hub instead (BFF_PUSH_ROUTE, BFF_NH_CONNECTION_STRING,
// BFF_NH_HUB, BFF_OUTBOUND_CA_FILE; nh.env is written first). Prints one line per accepted push on
// stdout:
//   <unix time, µs> <apns|fcm> <token's last 8 characters> <deep link>
// and per send the hub accepted (a tag send reaching no installation included: the bench registers none):
//   <unix time, µs> <nh-apple|nh-fcmv1> <tag's last 8 characters> <deep link>
// One line per refused request on stderr, and, every second when they changed, the most requests in
// flight at once on one HTTP/2 connection of each service (a stream each) and the connections seen:
//   push-stand-in: streams: apns max N in flight on one connection (C connections), fcm …, nh …
// Runs until killed.
import Foundation
import Logging
import StandIns

func write(_ line: String, to handle: FileHandle) { handle.write(Data((line + "\n").utf8)) }

/// "apns max 97 in flight on one connection (2 connections)".
func describe(_ service: String, _ figures: StreamCounts.Figures) -> String {
    "\(service) max \(figures.maxInFlight) in flight on one connection (\(figures.connections) connection\(figures.connections == 1 ? "" : "s"))"
}

do {
    let usage = "push-stand-in --dir DIR --cert FILE --key FILE [--apns-port P] [--fcm-port P] [--nh-port P] [--latency-ms N]"
    let values = StandInOptions(usage: usage)
    let (directory, certificate, key) = (values.required("dir", usage: usage), values.required("cert", usage: usage), values.required("key", usage: usage))
    let apnsPort = values.int("apns-port", default: 0)
    let fcmPort = values.int("fcm-port", default: 0)
    let nhPort = values.int("nh-port", default: 0)
    let latency = Duration.milliseconds(values.int("latency-ms", default: 0))
    let logger = {
        var logger = Logger(label: "push-stand-in")
        logger.logLevel = .warning
        return logger
    }()

    let onAccepted: @Sendable (AcceptedPush) -> Void = { push in
        let micros = Int64(Date().timeIntervalSince1970 * 1_000_000)
        write("\(micros / 1_000_000).\(String(format: "%06d", micros % 1_000_000)) \(push.service) \(push.token.suffix(8)) \(push.deepLink ?? "-")", to: .standardOutput)
    }
    let answer: @Sendable (String, Int) -> ScriptedAnswer = { _, _ in latency == .zero ? .accept : .stall(latency) }
    let apns = LocalAPNs(answer: answer, keepReceived: false, onAccepted: onAccepted)
    let fcm = LocalFCM(answer: answer, keepReceived: false, onAccepted: onAccepted)
    // The hub answers its sends and installation calls after the same latency.
    let hubs = LocalNotificationHubs(answer: answer, operation: answer, keepReceived: false, onAccepted: onAccepted)
    let streams = (apns: StreamCounts(), fcm: StreamCounts(), nh: StreamCounts())
    let tls = try standInTLS(certificatePath: certificate, keyPath: key)

    try await serveStandIn(apns.router, tls: tls, port: apnsPort, streams: streams.apns, logger: logger) { apnsBase in
        try await serveStandIn(fcm.router, tls: tls, port: fcmPort, streams: streams.fcm, logger: logger) { fcmBase in
            try await serveStandIn(hubs.router, tls: tls, port: nhPort, streams: streams.nh, logger: logger) { nhBase in
                // The hub's route: a connection string whose sb:// endpoint is this listener (the
                // server sends to https://localhost:PORT/HUB/…), trusted through the same CA file.
                let hubEnvironment = [
                    "BFF_PUSH_ROUTE=notification-hubs",
                    "BFF_NH_CONNECTION_STRING=\(hubs.connectionString(base: nhBase))",
                    "BFF_NH_HUB=\(hubs.hub)",
                    "BFF_OUTBOUND_CA_FILE=\(certificate)",
                ]
                try (hubEnvironment.joined(separator: "\n") + "\n").write(toFile: "\(directory)/nh.env", atomically: true, encoding: .utf8)
                let environment = [
                    "BFF_PUSH_ROUTE=direct",
                    "BFF_APNS_BASE_URL=\(apnsBase)",
                    "BFF_APNS_KEY_FILE=\(try apns.keyFile(in: directory))",
                    "BFF_APNS_KEY_ID=\(apns.keyID)",
                    "BFF_APNS_TEAM_ID=\(apns.teamID)",
                    "BFF_APNS_TOPIC=\(apns.topic)",
                    "BFF_FCM_BASE_URL=\(fcmBase)",
                    "BFF_FCM_CREDENTIALS_FILE=\(try fcm.credentialsFile(in: directory, base: fcmBase))",
                    "BFF_OUTBOUND_CA_FILE=\(certificate)",
                ]
                // Written last: a script waiting for push.env finds nh.env there too.
                try (environment.joined(separator: "\n") + "\n").write(toFile: "\(directory)/push.env", atomically: true, encoding: .utf8)
                write(
                    "push-stand-in: APNs \(apnsBase), FCM \(fcmBase), Notification Hubs \(nhBase)/\(hubs.hub), answering after \(latency);"
                        + " BFF_* in \(directory)/push.env (direct route) and \(directory)/nh.env (hub route)", to: .standardError)
                // Refusals are what a real service would answer an error to: say them as they come.
                var reported = (apns: 0, fcm: 0, nh: 0)
                let streamsLine = {
                    "streams: \(describe("apns", streams.apns.figures)), \(describe("fcm", streams.fcm.figures)), \(describe("nh", streams.nh.figures))"
                }
                var lastStreams = streamsLine()
                while true {
                    try await Task.sleep(for: .seconds(1))
                    let apnsViolations = apns.violations.withLockedValue { $0 }
                    let fcmViolations = fcm.violations.withLockedValue { $0 }
                    let nhViolations = hubs.violations.withLockedValue { $0 }
                    for violation in apnsViolations.dropFirst(reported.apns) { write("push-stand-in: APNs refused a request: \(violation)", to: .standardError) }
                    for violation in fcmViolations.dropFirst(reported.fcm) { write("push-stand-in: FCM refused a request: \(violation)", to: .standardError) }
                    for violation in nhViolations.dropFirst(reported.nh) {
                        write("push-stand-in: Notification Hubs refused a request: \(violation)", to: .standardError)
                    }
                    reported = (apnsViolations.count, fcmViolations.count, nhViolations.count)
                    let streamsNow = streamsLine()
                    if streamsNow != lastStreams {
                        write("push-stand-in: \(streamsNow)", to: .standardError)
                        lastStreams = streamsNow
                    }
                }
            }
        }
    }
} catch {
    write("push-stand-in: \(error)", to: .standardError)
    exit(1)
}
