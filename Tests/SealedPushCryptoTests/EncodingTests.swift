import Testing
import SealedPushTestSupport
@testable import SealedPushCrypto

extension CryptoTests {
    @Suite("Base64: the variable-time public encoder and decoder agree with libsodium's")
    struct PublicBase64Tests {
        /// Both decoders on one input: the same bytes, or both refuse.
        static func agree(_ text: String) -> Bool {
            let reference = try? Base64.decode(text)
            let fast = try? Base64.decodePublic(text)
            return reference == fast
        }

        @Test("every encoding of 0…300 random bytes decodes to the same bytes")
        func roundTrips() throws {
            for length in 0...300 {
                let bytes = CryptoLibrary.randomBytes(count: length)
                let text = Base64.encode(bytes)
                #expect(try Base64.decodePublic(text) == bytes, "length \(length)")
            }
        }

        @Test("the public encoder writes what libsodium's does, for 0…300 random bytes and every byte value")
        func encoderAgrees() {
            for length in 0...300 {
                let bytes = CryptoLibrary.randomBytes(count: length)
                #expect(Base64.encodePublic(bytes) == Base64.encode(bytes), "length \(length)")
            }
            let every = (0...255).map { UInt8($0) }
            for shift in 0..<3 {
                let bytes = Array(every.dropFirst(shift))
                #expect(Base64.encodePublic(bytes) == Base64.encode(bytes))
            }
        }

        @Test("named edge cases: padding, trailing bits, junk, whitespace, NUL, non-ASCII")
        func edgeCases() {
            let cases = ["", "=", "==", "A", "AA", "AA=", "AA==", "AA===", "AAA", "AAA=", "AAA==", "AAAA", "AAAA=",
                         "AB==", "AQ==", "AAB=", "AAE=", "Zg==", "Zm8=", "Zm9v", "Zm9v\n", " Zm9v", "Zm 9v", "Zm9v\u{0}",
                         "Zm-_", "Zm9v====", "Zg=a", "Zg==Zg==", "=Zg=", "Zm9vYg", "Zm9vYg=", "Zm9vYg==", "Zm9vYmE=",
                         "Zé9v", "Zm9v\u{FEFF}", "////", "++++", "+/+/AA==", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AAAAB==="]
            for text in cases {
                #expect(Self.agree(text), "decoders disagree on \(text.debugDescription)")
            }
        }

        /// libsodium 1.0.18 decodes some bytes ≥ 0x80 as '+' or '/' (its constant-time compare assumes
        /// 0…255 and gets a negative `char`): `"\u{C3}\u{C3}\u{C3}\u{C3}"` as raw bytes gave `ff ff ff`.
        /// Both decoders now refuse every non-ASCII byte.
        @Test("non-ASCII characters are refused by both decoders (libsodium 1.0.18 accepted some)")
        func nonASCIIRefused() {
            for text in ["ééé=", "ÃÃÃÃ", "AAAé", "é", "QUJDÃ", "ÿÿÿÿ", "€€", "QUJD\u{FEFF}"] {
                #expect(throws: CryptoError.self, "\(text)") { try Base64.decode(text) }
                #expect(throws: CryptoError.self, "\(text)") { try Base64.decodePublic(text) }
            }
        }

        @Test("200 000 random strings over the alphabet, '=', and a few other bytes")
        func randomStrings() {
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".unicodeScalars)
            let extra: [Unicode.Scalar] = ["=", "=", "=", "-", "_", " ", "\n", "\u{0}", "é", "A", "Q", "g", "w"]
            var rng = SeededGenerator.forTest()
            var disagreements: [String] = []
            for _ in 0..<200_000 {
                let length = Int.random(in: 0...14, using: &rng)
                var text = String.UnicodeScalarView()
                for _ in 0..<length {
                    text.append(Int.random(in: 0..<8, using: &rng) == 0 ? extra.randomElement(using: &rng)! : alphabet.randomElement(using: &rng)!)
                }
                let s = String(text)
                if !Self.agree(s) { disagreements.append(s) }
            }
            #expect(disagreements.isEmpty, "disagree on \(disagreements.prefix(5).map(\.debugDescription))")
        }

        @Test("valid encodings with one character changed, removed or added")
        func mutations() throws {
            let symbols = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ \n")
            var rng = SeededGenerator.forTest()
            for length in [1, 2, 3, 4, 5, 32, 57, 313] {
                let text = Array(Base64.encode(CryptoLibrary.randomBytes(count: length)))
                for _ in 0..<400 {
                    var mutated = text
                    let at = Int.random(in: 0..<mutated.count, using: &rng)
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0: mutated[at] = symbols.randomElement(using: &rng)!
                    case 1: mutated.remove(at: at)
                    default: mutated.insert(symbols.randomElement(using: &rng)!, at: at)
                    }
                    let s = String(mutated)
                    #expect(Self.agree(s), "decoders disagree on \(s.debugDescription)")
                }
            }
        }
    }

    @Test("a key pair rebuilt with its stored public key opens what was sealed to it; a wrong public key only fails")
    func keyPairWithStoredPublicKey() throws {
        let original = BoxKeyPair.generate()
        let rebuilt = try BoxKeyPair(secretKey: original.secretKey, publicKey: original.publicKey)
        #expect(rebuilt.publicKey == original.publicKey)
        let message = SecureBytes(Array("sealed to the stored key".utf8))
        let box = try SealedBox.seal(message, to: original.publicKey)
        #expect(try SealedBox.open(bytes: box, with: rebuilt) == message)
        let mismatched = try BoxKeyPair(secretKey: original.secretKey, publicKey: BoxKeyPair.generate().publicKey)
        #expect(throws: CryptoError.self) { try SealedBox.open(bytes: box, with: mismatched) }
        #expect(throws: CryptoError.self) { try BoxKeyPair(secretKey: SecureBytes(zeros: 31), publicKey: original.publicKey) }
    }
}

extension CryptoTests {
    @Suite("Padding: the unpad scan agrees with sodium_unpad")
    struct UnpadTests {
        static func agree(_ bytes: [UInt8]) -> Bool {
            let buffer = SecureBytes(bytes)
            let ours = try? ISO7816Padding.unpaddedLength(of: buffer)
            return ours == ISO7816Padding.referenceUnpaddedLength(of: buffer)
        }

        @Test("every pad of every length 0…300 into 1…301 bytes, and the named refusals")
        func padsAndRefusals() throws {
            for padded in [1, 2, 3, 255, 256, 257, 512, 1024, 2048, 2919] {
                for length in Set([0, 1, padded / 2, padded - 2, padded - 1]) where length >= 0 && length < padded {
                    let data = SecureBytes(CryptoLibrary.randomBytes(count: length))
                    let bytes = try ISO7816Padding.pad(data, to: padded).unsafeCopyToArray()
                    #expect(try ISO7816Padding.unpaddedLength(of: SecureBytes(bytes)) == length)
                    #expect(Self.agree(bytes))
                }
            }
            for bytes: [UInt8] in [[], [0], [0, 0], [0x80], [0x81], [0x80, 0x01], [0x80, 0x00], [0x01, 0x80, 0x00, 0x00],
                                   [0x80, 0x80], [0x00, 0x80, 0x00], [0x7F, 0x00], [0xFF], [0x80] + [UInt8](repeating: 0, count: 300)] {
                #expect(Self.agree(bytes), "\(bytes.prefix(8))")
            }
        }

        @Test("100 000 random tails: random data, then 0x80 or another byte, then 0…40 zeros")
        func randomTails() {
            var rng = SeededGenerator.forTest()
            var mismatches: [[UInt8]] = []
            for _ in 0..<100_000 {
                var bytes = (0..<Int.random(in: 0...12, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                let marks: [UInt8] = [0x80, 0x80, 0x80, 0x00, 0x01, 0x7F, 0x81, 0xFF]
                bytes.append(marks.randomElement(using: &rng)!)
                bytes += [UInt8](repeating: 0, count: Int.random(in: 0...40, using: &rng))
                if !Self.agree(bytes) { mismatches.append(bytes) }
            }
            #expect(mismatches.isEmpty, "\(mismatches.prefix(3))")
        }
    }
}
