// revenuecat-stand-in: RevenueCat's REST API v1 on this machine (StandIns.LocalRevenueCat), for
// development, the contract run and the benchmark. It checks requests as RevenueCat does; nothing
// reaches a store.
//
//   revenuecat-stand-in --port P [--api-key K] [--latency-ms N] [--product ID]
//
// Point the server at it with BFF_REVENUECAT_BASE_URL=http://127.0.0.1:P/v1 and
// BFF_REVENUECAT_API_KEY=K (default sk_local_revenuecat). Any receipt is accepted and grants a
// month of the product it names (else --product, default com.example.learn.pro.monthly).
//
// Besides the API, for the benchmark and anyone trying things by hand:
//   PUT /_control/customers/{app_user_id}  {"product_id": "…", "store": "app_store", "expires_in_seconds": N,
//                                           "unsubscribed": false, "refunded": false}   (sets the only subscription)
//   GET /_control/calls                    {app_user_id: [unix times of GET /subscribers calls]}
import Foundation
import Hummingbird
import NIOCore
import StandIns

let program = StandInProgram("revenuecat-stand-in")
let usage = "revenuecat-stand-in --port P [--api-key K] [--latency-ms N] [--product ID]"
let values = StandInOptions(usage: usage)
let port = program.port(values, usage: usage)
let revenueCat = LocalRevenueCat(
    apiKey: values["api-key"] ?? "sk_local_revenuecat", latency: .milliseconds(values.int("latency-ms", default: 0)),
    acceptAnyReceipt: (values["product"] ?? "com.example.learn.pro.monthly", "ios"))

struct Control: Decodable {
    let product_id: String
    let store: String?
    let expires_in_seconds: Double?
    let unsubscribed: Bool?
    let refunded: Bool?
}

let router = revenueCat.router
router.put("/_control/customers/:id") { request, context -> Response in
    guard let id = context.parameters.get("id") else { return Response(status: .notFound) }
    let control = try JSONDecoder().decode(Control.self, from: Data(buffer: try await request.body.collect(upTo: 65_536)))
    let now = Date()
    revenueCat.set(
        id,
        [
            control.product_id: .init(
                store: control.store ?? "app_store", purchaseAt: now.addingTimeInterval(-86_400),
                expiresAt: control.expires_in_seconds.map { now.addingTimeInterval($0) }, unsubscribedAt: control.unsubscribed == true ? now : nil,
                refundedAt: control.refunded == true ? now : nil)
        ])
    return Response(status: .noContent)
}
router.get("/_control/calls") { _, _ -> Response in
    let times = revenueCat.subscriberCallTimes.withLockedValue { $0 }.mapValues { $0.map(\.timeIntervalSince1970) }
    return Response(
        status: .ok, headers: [.contentType: "application/json"],
        body: .init(byteBuffer: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: times))))
}

await program.serve(router, port: port, banner: { "\($0)/v1 (key \(revenueCat.apiKey))" }, violations: revenueCat.violations)
