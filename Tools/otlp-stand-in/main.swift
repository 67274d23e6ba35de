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
import NIOCore
import StandIns

let program = StandInProgram("otlp-stand-in")
let usage = "otlp-stand-in --port P"
let port = program.port(StandInOptions(usage: usage), usage: usage)
let collector = LocalOTLPCollector(keepSpans: false)

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

await program.serve(router, port: port, banner: { "\($0)/v1/traces" }, violations: collector.violations, what: "an export")
