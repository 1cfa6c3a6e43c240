import Foundation
import SealedPushCrypto
import SealedPushSender
import SealedPushTestSupport
import SealedPushWire
import Testing

/// A signer that holds its key elsewhere, like a KMS or an HSM: no local key pair, an asynchronous `sign`
/// that suspends, and a log of what it was asked to sign (lengths only).
actor RemoteSigner: MessageSigner {
    private let key = SigningKeyPair.generate()
    nonisolated let keyID: KeyID
    nonisolated let publicKey: SigningPublicKey
    private(set) var requests = 0
    enum Behaviour: Sendable { case sign, shortSignature, fail }
    let behaviour: Behaviour

    struct Unavailable: Error, CustomStringConvertible { var description: String { "KMS unavailable (throttled)" } }

    init(_ behaviour: Behaviour = .sign) {
        keyID = key.keyID
        publicKey = key.publicKey
        self.behaviour = behaviour
    }

    func sign(_ message: SecureBytes) async throws -> [UInt8] {
        requests += 1
        await Task.yield()  // a network round trip would suspend here
        switch behaviour {
        case .sign: return key.signature(for: message)
        case .shortSignature: return Array(key.signature(for: message).prefix(63))
        case .fail: throw Unavailable()
        }
    }
}

@Suite("Sender: the MessageSigner seam")
struct SignerSeamTests {
    @Test("a remote signer signs through sealAsync; devices that trust its key verify it")
    func remoteSigner() async throws {
        let device = makeDevice()
        let signer = RemoteSigner()
        let sender = try makeSender(signer: signer)
        let message = SecretMessage(title: "Agent K", body: "The eagle lands at noon.")
        let sealed = try await sender.sealAsync(message, to: device.record)
        #expect(sealed.signedBy == signer.keyID)
        #expect(await signer.requests == 1)
        let opened = try openSealed(sealed, with: [device.pair], trusting: [signer.publicKey], requireSignature: true)
        #expect(opened.signedBy == signer.keyID)
        #expect(opened.body.alert.body == "The eagle lands at noon.")

        // The synchronous path cannot await the signer: it says what to call instead.
        #expect(throws: SenderError.signerIsRemote(keyID: signer.keyID.hex)) { try sender.seal(message, to: device.record) }
        #expect(SenderError.signerIsRemote(keyID: signer.keyID.hex).description.contains("try await sender.sealAsync(message, to: record)"))

        // Fan-out: one signature per device copy (it covers the recipient's key id).
        let others = [makeDevice(), makeDevice()]
        let results = await sender.sealAsync(message, toEach: others.map(\.record))
        #expect(await signer.requests == 3)
        for (result, other) in zip(results, others) {
            let copy = try result.result.get()
            #expect(try openSealed(copy, with: [other.pair], trusting: [signer.publicKey], requireSignature: true).signedBy == signer.keyID)
        }
    }

    @Test("an in-memory key signs on the synchronous path, and sealAsync takes it too")
    func localSigner() async throws {
        let device = makeDevice()
        let key = SigningKeyPair.generate()
        let sender = try makeSender(signer: key)
        let message = SecretMessage(body: "local")
        let sync = try sender.seal(message, to: device.record)
        let async = try await sender.sealAsync(message, to: device.record)
        for sealed in [sync, async] {
            #expect(sealed.signedBy == key.keyID)
            #expect(try openSealed(sealed, with: [device.pair], trusting: [key.publicKey], requireSignature: true).signedBy == key.keyID)
        }
        #expect(try makeSender().seal(message, to: device.record).signedBy == nil)
    }

    @Test("a failing signer or a malformed signature is signingFailed, naming the key and never the message")
    func signerFailures() async throws {
        let device = makeDevice()
        let message = SecretMessage(title: "Agent K", body: "The eagle lands at noon.")
        for behaviour in [RemoteSigner.Behaviour.fail, .shortSignature] {
            let signer = RemoteSigner(behaviour)
            let sender = try makeSender(signer: signer)
            do {
                _ = try await sender.sealAsync(message, to: device.record)
                Issue.record("\(behaviour): sealed")
            } catch {
                guard case let .signingFailed(keyID, why) = error else { Issue.record("\(behaviour): \(error)"); continue }
                #expect(keyID == signer.keyID.hex)
                #expect(why == (behaviour == .fail ? "KMS unavailable (throttled)" : "it returned 63 bytes, not a 64-byte Ed25519 signature"))
                #expect(!error.description.contains("eagle") && !error.description.contains("Agent K"))
            }
        }
    }
}

/// Issue #15 item 11: the `Codable` payload model re-encodes at the sealed size.
@Suite("Sender: re-encoding the payload model")
struct PayloadReencodingTests {
    @Test("a --padding max payload (4094 bytes) re-encodes at its size with APNsPayload's encoder; a default JSONEncoder would grow it")
    func reencodingKeepsTheSize() throws {
        let device = makeDevice()
        let sender = try makeSender(padding: .max)
        let sealed = try sender.seal(SecretMessage(title: "Agent K", body: "The eagle lands at noon."), to: device.record)
        #expect(sealed.payload.count == 4094)
        let model = try #require(sealed.payloadModel)
        let encoded = try model.encodedJSON()
        #expect(encoded.count == sealed.payload.count)
        #expect(try JSONDecoder().decode(APNsPayload.self, from: encoded) == model)
        #expect(model.jsonBytes == sealed.payload)
        // What the warning in the docs is about: every "/" of the base64 becomes "\/".
        let slashes = model.encryptedData.utf8.filter { $0 == UInt8(ascii: "/") }.count
        #expect(try JSONEncoder().encode(model).count == sealed.payload.count + slashes)
    }
}
