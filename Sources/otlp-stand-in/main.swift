// otlp-stand-in: an OpenTelemetry collector's OTLP/HTTP traces receiver on this machine
// (StandIns.LocalOTLPCollector), for the benchmark and anyone trying traces by hand. It decodes
// and checks every export as a collector does, counts the spans and keeps none.
//
//   otlp-stand-in --port P
//
// Point the server at it with OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:P.
//   GET /_control/stats   {"exports": N, "spans": N, "refused": N}
import Foundation
import Hummingbird
import Logging
import NIOCore
import StandIns

func write(_ line: String) { FileHandle.standardError.write(Data((line + "\n").utf8)) }

let usage = "otlp-stand-in --port P"
let values = StandInOptions(usage: usage)
guard let port = Int(values.required("port", usage: usage)) else {
    write("otlp-stand-in: --port must be a number")
    exit(2)
}
let collector = LocalOTLPCollector(keepSpans: false)
let logger = {
    var logger = Logger(label: "otlp-stand-in")
    logger.logLevel = .warning
    return logger
}()

let router = collector.router
router.get("/_control/stats") { _, _ -> Response in
    let stats = [
        "exports": collector.exports.withLockedValue { $0 }, "spans": collector.spanCount.withLockedValue { $0 },
        "refused": collector.violations.withLockedValue { $0.count },
    ]
    return Response(
        status: .ok, headers: [.contentType: "application/json"],
        body: .init(byteBuffer: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: stats))))
}

do {
    try await serveHTTP1(router, port: port, logger: logger) { base in
        write("otlp-stand-in: \(base)/v1/traces")
        var reported = 0
        while true {
            try await Task.sleep(for: .seconds(1))
            let violations = collector.violations.withLockedValue { $0 }
            for violation in violations.dropFirst(reported) { write("otlp-stand-in: refused an export: \(violation)") }
            reported = violations.count
        }
    }
} catch {
    write("otlp-stand-in: \(error)")
    exit(1)
}
