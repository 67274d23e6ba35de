import HTTPTypes
import Hummingbird

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
}

/// The address a per-client limit is keyed on: the peer, or — only when the peer is a trusted proxy —
/// the right-most `X-Forwarded-For` hop that is not itself a trusted proxy (the left part is client-controlled).
/// An IPv6 client is keyed on its /64, which one subscriber holds whole and could otherwise spend
/// one fresh bucket per address of; an IPv4-mapped IPv6 address is its IPv4 address.
package struct ClientAddress {
    let trustedProxies: [IPNetwork]

    package init(trustedProxies: [IPNetwork]) {
        self.trustedProxies = trustedProxies
    }

    package func resolve(_ request: Request, context: some PlatformRequestContext) -> String {
        key(peer: context.remoteAddress?.ipAddress, forwardedFor: request.headers[.xForwardedFor])
    }

    func key(peer: String?, forwardedFor: String?) -> String {
        guard let peer = peer.flatMap(IPNetwork.bytes(of:)) else { return "unknown" }
        guard isTrusted(peer), let forwardedFor else { return Self.key(peer) }
        for hop in forwardedFor.split(separator: ",").reversed() {
            // A hop that is no address at all ends the trusted chain: the peer answers for it.
            guard let address = Self.address(ofHop: hop.trimmingCharacters(in: .whitespaces)) else { return Self.key(peer) }
            if !isTrusted(address) { return Self.key(address) }
        }
        return Self.key(peer)
    }

    /// A hop's address. Some proxies (Azure's, for one) add the client's port: `203.0.113.7:4711`,
    /// `[2001:db8::1]:4711`. Read as no address, every client behind such a proxy would share its bucket.
    static func address(ofHop hop: String) -> [UInt8]? {
        if let address = IPNetwork.bytes(of: hop) { return address }
        var host = Substring(hop)
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || Self.isPort(rest) else { return nil }
            host = host[host.index(after: host.startIndex)..<close]
            return host.contains(":") ? IPNetwork.bytes(of: String(host)) : nil
        }
        guard let colon = host.firstIndex(of: ":"), Self.isPort(host[colon...]) else { return nil }
        host = host[..<colon]
        guard let address = IPNetwork.bytes(of: String(host)), address.count == 4 else { return nil }
        return address
    }

    /// `:` and one to five digits.
    private static func isPort(_ text: Substring) -> Bool {
        let digits = text.dropFirst()
        return text.first == ":" && (1...5).contains(digits.count) && digits.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// Whether a peer's `X-Forwarded-For` is read: it is one of the trusted proxies.
    func isTrustedPeer(_ peer: String?) -> Bool {
        peer.flatMap(IPNetwork.bytes(of:)).map(isTrusted) ?? false
    }

    private func isTrusted(_ address: [UInt8]) -> Bool {
        trustedProxies.contains { $0.contains(address) }
    }

    private static func key(_ address: [UInt8]) -> String {
        if address.count == 4 { return address.map(String.init).joined(separator: ".") }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }
}
