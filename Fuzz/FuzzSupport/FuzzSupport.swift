public import SealedPushCrypto
public import SealedPushWire
import Foundation

/// Fixed keys, clock and helpers shared by the libFuzzer harnesses.
///
/// The keys are derived at start-up from constant seeds (BLAKE2b of a label), so every run and every
/// corpus file agrees on them; nothing is copied from the shared vector file into the project.
public enum FuzzFixture {
    /// The device clock every harness uses (Unix seconds).
    public static let now: Int64 = 1_800_000_000
    /// The clock skew of the harness policies.
    public static let skew: Int64 = WireFormat.defaultClockSkewSeconds

    /// The fuzz device's X25519 key pair.
    public static let deviceKey: BoxKeyPair = {
        // A 32-byte secret derived from a constant label; cannot fail for 32 bytes.
        try! BoxKeyPair(secretKey: SecureBytes(seed("SealedPush fuzz device key v1"), guarded: true))
    }()

    /// A sender signing key the fuzz device trusts.
    public static let trustedSender: SigningKeyPair = {
        try! SigningKeyPair(seed: SecureBytes(seed("SealedPush fuzz trusted sender v1"), guarded: true))
    }()

    /// A sender signing key the fuzz device does not trust.
    public static let untrustedSender: SigningKeyPair = {
        try! SigningKeyPair(seed: SecureBytes(seed("SealedPush fuzz untrusted sender v1"), guarded: true))
    }()

    /// A key id no key of the fixture has.
    public static let strangerKeyID: KeyID = KeyID(publicKey: seed("SealedPush fuzz stranger v1"))

    private static func seed(_ label: String) -> [UInt8] { Blake2b.hash(Array(label.utf8), outputLength: 32) }

    /// A body addressed to the fuzz device.
    public static func body(id: String = "fuzz-message-1", title: String = "Agent K", text: String = "The eagle lands at noon.",
                            issuedAt: Int64 = now, expiresAt: Int64? = nil, sender: KeyID? = nil) -> MessageBody {
        MessageBody(kid: deviceKey.keyID, id: id, issuedAt: issuedAt, expiresAt: expiresAt,
                    alert: .init(title: title, body: text), sender: sender)
    }

    /// A body with `attachments`: one valid descriptor per type given (ids `a1`…), fixed keys.
    public static func bodyWithAttachments(_ types: [String]) -> MessageBody {
        var body = body()
        body.attachments = types.enumerated().map { i, type in
            AttachmentDescriptor(id: "a\(i + 1)", url: "https://media.example.com/o/\(i)", key: SecureBytes(seed("SealedPush fuzz media \(i)")),
                                 type: type, size: 1_000 + i, name: i == 0 ? "photo.jpg" : nil, thumbnailHidden: i == 1 ? true : nil,
                                 thumbnailTime: i == 2 ? 3 : nil)
        }
        return body
    }

    /// Body JSON with hostile `attachments` members (each must be `malformedMessage`, never a crash).
    public static func hostileAttachmentBodies() -> [[UInt8]] {
        let valid = JSON.serialize(.object(bodyWithAttachments(["image/jpeg"]).jsonObject))
        let text = String(decoding: valid, as: UTF8.self)
        let key = Base64.encode(seed("SealedPush fuzz media 0"))
        let d = #"{"id":"a","url":"https://h/o","key":"\#(key)","type":"image/png","size":1}"#
        let variants = [
            #""attachments":{}"#, #""attachments":[]"#, #""attachments":[1]"#, #""attachments":[\#(d),\#(d)]"#,
            #""attachments":[\#(d),\#(d),\#(d),\#(d),\#(d)]"#,
            #""attachments":[{"id":"a/b","url":"https://h/o","key":"\#(key)","type":"image/png","size":1}]"#,
            #""attachments":[{"id":"a","url":"https://h/o","key":"AAAA","type":"image/png","size":1}]"#,
            #""attachments":[{"id":"a","url":"https://h/o","key":"\#(key)","type":"image/png","size":0}]"#,
            #""attachments":[{"id":"a","url":"https://h/o","key":"\#(key)","type":"image/png","size":"1"}]"#,
            #""attachments":[{"id":"a","url":"https://h/o","key":"\#(key)","type":"image/png","size":1,"name":"a\u0000b"}]"#,
            #""attachments":[{"id":"a","url":"https://h/o","key":"\#(key)","type":"image/png","size":1,"thumbnail-time":-1}]"#,
            #""attachments":[{"id":"a","url":"http://evil/o","key":"\#(key)","type":"image/webp","size":99999999999}]"#,
        ]
        return variants.map { Array(text.replacingOccurrences(of: "}", with: ",\($0)}", options: .backwards, range: text.range(of: "}", options: .backwards)).utf8) }
    }

    /// Stops the process (libFuzzer records the input as a crash) when an invariant does not hold.
    /// The message names the invariant only, never input bytes.
    public static func check(_ condition: @autoclosure () -> Bool, _ invariant: StaticString) {
        if !condition() { fatalError("fuzz invariant violated: \(invariant)") }
    }
}

/// Seed-corpus generation: each harness exports `LLVMFuzzerInitialize`, which calls
/// `SeedCorpus.generateIfAsked` before libFuzzer starts. With `SEALEDPUSH_FUZZ_GENERATE=<dir>` set,
/// the seeds are written there (one file per seed, named by content hash) and the process exits.
public enum SeedCorpus {
    /// Writes `make()`'s seeds and exits when `SEALEDPUSH_FUZZ_GENERATE` is set; otherwise returns.
    public static func generateIfAsked(_ make: () throws -> [[UInt8]]) {
        guard let dir = ProcessInfo.processInfo.environment["SEALEDPUSH_FUZZ_GENERATE"], !dir.isEmpty else { return }
        do {
            let seeds = try make()
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            for seed in seeds {
                let name = Hex.encode(Blake2b.hash(seed, outputLength: 16))
                try Data(seed).write(to: URL(fileURLWithPath: dir).appendingPathComponent("seed-\(name)"))
            }
            print("wrote \(seeds.count) seeds to \(dir)")
            exit(0)
        } catch {
            print("seed generation failed: \(error)")
            exit(1)
        }
    }

    /// The `encrypted_data` values of the shared vectors, read at run time from
    /// `$SEALEDPUSH_SHARED/vectors/wire-v1.json` (default `../shared` beside the repository).
    public static func vectorEncryptedData() throws -> [String] {
        let env = ProcessInfo.processInfo.environment["SEALEDPUSH_SHARED"] ?? ""
        let shared = env.isEmpty ? FileManager.default.currentDirectoryPath + "/../shared" : env
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: shared + "/vectors/wire-v1.json")))
        guard case let .object(root) = try JSON.parse(bytes), case let .array(vectors)? = root["vectors"] else { return [] }
        return vectors.compactMap { $0.objectValue?["encrypted_data"]?.stringValue }
    }

    /// The padded inner message of `body` (optionally signed), as the sealer would build it.
    public static func paddedInner(_ body: MessageBody, signer: SigningKeyPair?, paddedLength: Int? = nil) -> [UInt8] {
        let inner = InnerMessage.frame(body: SecureBytes(JSON.serialize(.object(body.jsonObject))),
                                       recipient: FuzzFixture.deviceKey.keyID, signer: signer)
        let length = paddedLength ?? (WireFormat.paddingBuckets.first { $0 > inner.count } ?? inner.count + 1)
        return try! ISO7816Padding.pad(inner, to: max(length, inner.count + 1)).unsafeCopyToArray()
    }

    /// The framed (unpadded) inner message of `body`.
    public static func inner(_ body: MessageBody, signer: SigningKeyPair?) -> [UInt8] {
        InnerMessage.frame(body: SecureBytes(JSON.serialize(.object(body.jsonObject))),
                           recipient: FuzzFixture.deviceKey.keyID, signer: signer).unsafeCopyToArray()
    }
}
