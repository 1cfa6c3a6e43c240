#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SealedPushAPNsCore
import Testing

@Suite("apns-id generation")
struct APNsIDTests {
    /// Every id is a lowercase version 4 UUID in the 8-4-4-4-12 form, Foundation reads it back as the same UUID,
    /// and 20 000 of them are distinct (122 random bits each).
    @Test func randomIDsAreLowercaseVersion4UUIDs() {
        var seen = Set<String>()
        for _ in 0..<20_000 {
            let id = APNsID.random()
            let bytes = Array(id.utf8)
            #expect(bytes.count == 36)
            for (i, c) in bytes.enumerated() {
                if [8, 13, 18, 23].contains(i) {
                    #expect(c == UInt8(ascii: "-"))
                } else {
                    #expect((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66), "\(id)")
                }
            }
            #expect(bytes[14] == UInt8(ascii: "4"), "version 4: \(id)")
            #expect([UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(bytes[19]), "RFC 9562 variant: \(id)")
            #expect(UUID(uuidString: id)?.uuidString.lowercased() == id)
            seen.insert(id)
        }
        #expect(seen.count == 20_000)
    }

    @Test func aPushWithoutAnIDGetsANewOne() {
        let a = APNsPush(deviceToken: String(repeating: "a", count: 64), payload: [0x7B, 0x7D], topic: "t", expiration: 0)
        let b = APNsPush(deviceToken: String(repeating: "a", count: 64), payload: [0x7B, 0x7D], topic: "t", expiration: 0)
        #expect(a.apnsID != b.apnsID)
        #expect(UUID(uuidString: a.apnsID) != nil)
    }
}
