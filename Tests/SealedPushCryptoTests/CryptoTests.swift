import Testing
#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#else
import CSodium  // Linux: the system libsodium
#endif
@testable import SealedPushCrypto

@Suite("Crypto") struct CryptoTests {
    static func hex(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            out.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    /// libsodium's Montgomery ladder, the reference for the fast ephemeral public key.
    static func ladder(_ secret: [UInt8]) -> [UInt8] {
        var publicKey = [UInt8](repeating: 0, count: 32)
        _ = sodium_init()
        #expect(crypto_scalarmult_base(&publicKey, secret) == 0)
        return publicKey
    }

    @Test("RFC 7748 §6.1: Alice's and Bob's public keys", arguments: [
        ("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"),
        ("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb", "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"),
    ])
    func rfc7748Vectors(secret: String, publicKey: String) {
        #expect(SealedBox.ephemeralPublicKey(forSecret: SecureBytes(Self.hex(secret))) == Self.hex(publicKey))
    }

    @Test("edge scalars (all zero, all one bits, single bits, limb boundaries) agree with the ladder")
    func edgeScalars() {
        var secrets: [[UInt8]] = [[UInt8](repeating: 0, count: 32), [UInt8](repeating: 0xff, count: 32)]
        for bit in [0, 3, 50, 51, 52, 101, 102, 103, 152, 153, 203, 204, 253, 254, 255] {
            var s = [UInt8](repeating: 0, count: 32)
            s[bit / 8] |= 1 << UInt8(bit % 8)
            secrets.append(s)
            secrets.append(s.map { ~$0 })
        }
        for secret in secrets {
            #expect(SealedBox.ephemeralPublicKey(forSecret: SecureBytes(secret)) == Self.ladder(secret))
        }
    }

    @Test("2000 random scalars agree with the ladder")
    func randomScalars() {
        for _ in 0..<2000 {
            let secret = CryptoLibrary.randomBytes(count: 32)
            #expect(SealedBox.ephemeralPublicKey(forSecret: SecureBytes(secret)) == Self.ladder(secret))
        }
    }

    @Test("the Edwards-to-Montgomery map at its edges: y = 0 → u = 1, y = −1 → u = 0, y = 1 has no u")
    func fieldEdges() {
        #expect(Field25519.montgomeryU(fromEdwardsY: [UInt8](repeating: 0, count: 32)) == [1] + [UInt8](repeating: 0, count: 31))
        var minusOne = [UInt8](repeating: 0xff, count: 32)  // p − 1 = 2^255 − 20
        minusOne[0] = 0xec
        minusOne[31] = 0x7f
        #expect(Field25519.montgomeryU(fromEdwardsY: minusOne) == [UInt8](repeating: 0, count: 32))
        #expect(Field25519.montgomeryU(fromEdwardsY: [1] + [UInt8](repeating: 0, count: 31)) == nil)
        // Non-canonical y = p + 0 (bytes of 2^255 − 19) reduces to y = 0.
        var p = [UInt8](repeating: 0xff, count: 32)
        p[0] = 0xed
        p[31] = 0x7f
        #expect(Field25519.montgomeryU(fromEdwardsY: p) == [1] + [UInt8](repeating: 0, count: 31))
    }

    @Test("the sealing path with a fixed ephemeral secret: its first 32 bytes are the RFC public key, and libsodium opens it")
    func sealsWithFixedEphemeralKey() throws {
        let recipient = BoxKeyPair.generate()
        let message = SecureBytes(Array("sealed with Alice's RFC 7748 key as the ephemeral".utf8))
        let secret = SecureBytes(Self.hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
        let box = try SealedBox.seal(message, to: recipient.publicKey, ephemeralSecret: secret)
        #expect(Array(box.prefix(32)) == Self.hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
        let opened = try SealedBox.open(bytes: box, with: recipient)
        #expect(opened.withUnsafeBytes { Array($0) } == message.withUnsafeBytes { Array($0) })
    }
}
