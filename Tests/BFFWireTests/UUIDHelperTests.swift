import Foundation
import NIOCore
import Testing

@testable import BFFWire

@Suite("UUID helpers", .timeLimit(.minutes(3)))
struct UUIDHelperTests {
    @Test("random() is version 4, RFC 4122 variant, and different each time; lowercasedString matches Foundation; canonical parsing both cases")
    func uuids() {
        var seen = Set<UUID>()
        for _ in 0..<1_000 {
            let uuid = UUID.random()
            let text = uuid.lowercasedString
            #expect(text == uuid.uuidString.lowercased())
            #expect(Array(text.utf8)[14] == UInt8(ascii: "4"))
            #expect("89ab".utf8.contains(Array(text.utf8)[19]))
            #expect(UUID(canonical: text) == uuid && UUID(canonical: uuid.uuidString) == uuid)
            seen.insert(uuid)
        }
        #expect(seen.count == 1_000)
        for bad in [
            "", "0a1b2c3d4e5f6789abcdef0123456789", "0a1b2c3d-4e5f-6789-abcd-ef012345678g", "0a1b2c3d-4e5f-6789-abcd_ef0123456789",
            "0a1b2c3d-4e5f-6789-abcd-ef01234567890",
        ] {
            #expect(UUID(canonical: bad) == nil, "\(bad)")
        }
    }
}
