import NIOCore

/// An address range from `BFF_TRUSTED_PROXIES` (`10.0.0.0/8`, `::1`, `192.168.1.7`); IPv4-mapped IPv6
/// addresses are read as the IPv4 address they carry.
public struct IPNetwork: Sendable, Equatable {
    let prefix: [UInt8]
    let prefixLength: Int

    public init?(_ text: String) {
        // Empty parts kept: "/" or "10.0.0.0/" is malformed, not an address without a prefix.
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard let bytes = IPNetwork.bytes(of: parts[0]) else { return nil }
        // `::ffff:10.0.0.0/104` reads as IPv4 (see `bytes(of:)`): its length counts 96 bits fewer.
        let mapped = bytes.count == 4 && parts[0].contains(":")
        let length = parts.count == 2 ? Int(parts[1]).map { mapped ? $0 - 96 : $0 } : bytes.count * 8
        guard let length, (0...(bytes.count * 8)).contains(length) else { return nil }
        prefix = bytes
        prefixLength = length
    }

    public func contains(_ address: String) -> Bool {
        IPNetwork.bytes(of: address).map(contains) ?? false
    }

    func contains(_ bytes: [UInt8]) -> Bool {
        guard bytes.count == prefix.count else { return false }
        var remaining = prefixLength
        for index in 0..<bytes.count where remaining > 0 {
            let bits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if bytes[index] & mask != prefix[index] & mask { return false }
            remaining -= bits
        }
        return true
    }

    static func bytes(of address: String) -> [UInt8]? {
        guard let socketAddress = try? SocketAddress(ipAddress: address, port: 0) else { return nil }
        switch socketAddress {
        case .v4(let v4):
            return withUnsafeBytes(of: v4.address.sin_addr) { Array($0) }
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            // ::ffff:a.b.c.d is how a dual-stack socket shows an IPv4 peer: compare it as IPv4.
            return bytes.prefix(12).elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]) ? Array(bytes.suffix(4)) : bytes
        case .unixDomainSocket:
            return nil
        }
    }
}
