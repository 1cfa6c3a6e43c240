import Testing
@testable import SealedPushCrypto

@Suite("Crypto") struct CryptoTests {
    @Test func fastEphemeralKeyMatchesLadder() throws {
        for _ in 0..<2000 {
            let secret = SecureBytes.random(count: 32)
            let fast = try #require(EphemeralKey.publicKey(forSecret: secret))
            let reference = try #require(EphemeralKey.referencePublicKey(forSecret: secret))
            #expect(fast == reference)
        }
    }
}
