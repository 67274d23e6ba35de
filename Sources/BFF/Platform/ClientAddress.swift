import HTTPTypes
import Hummingbird

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
}

/// The address a per-client limit is keyed on: the peer, or — only when the peer is a trusted proxy —
/// the right-most `X-Forwarded-For` hop that is not itself a trusted proxy (the left part is client-controlled).
struct ClientAddress {
    let trustedProxies: [IPNetwork]

    func resolve(_ request: Request, context: AppRequestContext) -> String {
        let peer = context.remoteAddress?.ipAddress ?? "unknown"
        guard isTrusted(peer), let forwarded = request.headers[.xForwardedFor] else { return peer }
        let hops = forwarded.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for hop in hops.reversed() where !isTrusted(hop) {
            return IPNetwork.bytes(of: hop) == nil ? peer : hop
        }
        return peer
    }

    private func isTrusted(_ address: String) -> Bool {
        trustedProxies.contains { $0.contains(address) }
    }
}
