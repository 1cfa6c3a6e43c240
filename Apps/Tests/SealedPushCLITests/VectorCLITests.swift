import Testing
import Foundation
import SealedPushCrypto
import SealedPushKeychain
import SealedPushWire
import SealedPushTestSupport

/// Every shared vector delivered by `sealedpush device push` to a keychain holding the vectors' keys.
@Suite("CLI: shared vectors through the device simulator", .timeLimit(.minutes(10))) struct VectorCLITests {
    static let file = SharedVectors.required

    /// A test keychain with the vectors' retired key (imported first) and active key (rotated to),
    /// their trusted sender, at the vectors' clock. The keys are read from ../shared at test time.
    static let keychain: URL = {
        let dir = try! makeScratchDirectory("vectors").appendingPathComponent("device")
        let now = Date(timeIntervalSince1970: TimeInterval(file.now - 3600))
        let store = try! KeychainStore(url: dir, clock: WallClock { now })
        let ring = DeviceKeyring(store: store)
        let retired = file.deviceKeys.first { $0.role == "retired" }!.keyPair
        let active = file.deviceKeys.first { $0.role == "active" }!.keyPair
        try! ring.generate(importing: retired)
        try! ring.rotate(to: active, grace: .seconds(86_400))
        for sender in file.trustedSenders { try! TrustStore(store: store).add(SenderKeyRecord(publicKey: sender)) }
        return dir
    }()

    @Test(arguments: VectorCLITests.file.vectors.map(\.name))
    func vector(name: String) throws {
        let vector = try #require(Self.file.vectors.first { $0.name == name })
        let r = try ChildProcess.sealedpush(["device", "push", "--json", "--keychain", Self.keychain.path, "--clock", String(Self.file.now), "-"],
                                  stdin: TestPayloads.wrap(encryptedData: vector.encryptedData))
        #expect(r.status == 0, "\(r.stderr)")
        guard case let .object(o) = try JSON.parse(r.stdout) else { Issue.record("no JSON object"); return }
        #expect(o["outcome"]?.stringValue == vector.outcome)
        let shown = o["notification"]?.objectValue
        if vector.outcome == "decrypted" {
            let alert = try #require(vector.body?["alert"]?.objectValue)
            #expect(shown?["title"]?.stringValue == alert["title"]?.stringValue ?? "")
            #expect(shown?["body"]?.stringValue == alert["body"]?.stringValue ?? "")
            #expect(o["reason"] == .null)
        } else {
            #expect(o["reason"]?.stringValue == vector.reason)
            #expect(shown?["body"]?.stringValue == "(Encrypted)")
        }
    }
}
