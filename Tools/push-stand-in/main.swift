// push-stand-in: local APNs and FCM servers for development and the benchmark. They speak each
// service's protocol and check what they receive (StandIns), but deliver nothing to a phone.
//
//   push-stand-in --dir DIR --cert FILE --key FILE [--apns-port P] [--fcm-port P] [--latency-ms N]
//
// Writes into DIR the APNs signing key, the FCM service account and `push.env`: the BFF_* lines
// that point a server at these stand-ins. Prints one line per accepted push on stdout:
//   <unix time, µs> <apns|fcm> <token's last 8 characters> <deep link>
// and one line per refused request on stderr. Runs until killed.
import Foundation
import Logging
import StandIns

func write(_ line: String, to handle: FileHandle) { handle.write(Data((line + "\n").utf8)) }

do {
    let usage = "push-stand-in --dir DIR --cert FILE --key FILE [--apns-port P] [--fcm-port P] [--latency-ms N]"
    let values = StandInOptions(usage: usage)
    let (directory, certificate, key) = (values.required("dir", usage: usage), values.required("cert", usage: usage), values.required("key", usage: usage))
    let apnsPort = values.int("apns-port", default: 0)
    let fcmPort = values.int("fcm-port", default: 0)
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
    let tls = try standInTLS(certificatePath: certificate, keyPath: key)

    try await serveStandIn(apns.router, tls: tls, port: apnsPort, logger: logger) { apnsBase in
        try await serveStandIn(fcm.router, tls: tls, port: fcmPort, logger: logger) { fcmBase in
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
            try (environment.joined(separator: "\n") + "\n").write(toFile: "\(directory)/push.env", atomically: true, encoding: .utf8)
            write("push-stand-in: APNs \(apnsBase), FCM \(fcmBase), answering after \(latency); BFF_* in \(directory)/push.env", to: .standardError)
            // Refusals are what a real service would answer an error to: say them as they come.
            var reported = (apns: 0, fcm: 0)
            while true {
                try await Task.sleep(for: .seconds(1))
                let apnsViolations = apns.violations.withLockedValue { $0 }
                let fcmViolations = fcm.violations.withLockedValue { $0 }
                for violation in apnsViolations.dropFirst(reported.apns) { write("push-stand-in: APNs refused a request: \(violation)", to: .standardError) }
                for violation in fcmViolations.dropFirst(reported.fcm) { write("push-stand-in: FCM refused a request: \(violation)", to: .standardError) }
                reported = (apnsViolations.count, fcmViolations.count)
            }
        }
    }
} catch {
    write("push-stand-in: \(error)", to: .standardError)
    exit(1)
}
