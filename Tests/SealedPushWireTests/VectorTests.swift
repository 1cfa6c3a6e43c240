import Testing
import SealedPushCrypto
import SealedPushWire
import SealedPushTestSupport

@Suite("Shared wire-format vectors") struct VectorTests {
    static let vectors = SharedVectors.required

    @Test("every vector gives its expected outcome", arguments: VectorTests.vectors.vectors.map(\.name))
    func vector(name: String) throws {
        let file = Self.vectors
        let vector = try #require(file.vectors.first { $0.name == name })
        let opener = MessageOpener(keys: InMemoryKeys(file.deviceKeys.map(\.keyPair)),
                                   policy: ReceiverPolicy(trustedSenders: file.trustedSenders, clockSkewSeconds: file.skewSeconds))
        switch vector.outcome {
        case "decrypted":
            let opened = try opener.open(encryptedData: vector.encryptedData, now: file.now)
            let expected = try #require(vector.body)
            #expect(JSONValue.object(opened.rawBody).normalized == JSONValue.object(expected).normalized)
        case "fallback":
            let expectedReason = try #require(vector.reason.flatMap(ReasonCode.init(rawValue:)))
            #expect(throws: OpenFailure.self) { try opener.open(encryptedData: vector.encryptedData, now: file.now) }
            do {
                _ = try opener.open(encryptedData: vector.encryptedData, now: file.now)
            } catch {
                #expect(error.reason == expectedReason)
            }
        default:
            Issue.record("unknown outcome \(vector.outcome)")
        }
    }

    @Test func vectorFileHasBothOutcomes() {
        #expect(Self.vectors.vectors.count >= 38)
        #expect(Self.vectors.vectors.contains { $0.outcome == "decrypted" })
        #expect(Self.vectors.vectors.contains { $0.outcome == "fallback" })
    }
}
