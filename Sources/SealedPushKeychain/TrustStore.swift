public import SealedPushCrypto
public import SealedPushKeyring
public import SealedPushWire

/// The device's trusted sender keys and signature policy, kept as items in the store.
///
/// Items (in the store's first access group, `alwaysThisDeviceOnly`, so policy is readable in every
/// lock state; none of it is secret, but it is authenticated like every item):
/// - `genericPassword@sealedpush.trusted-sender@<sender key id>.item`: the sender key record;
/// - `genericPassword@sealedpush.policy@require-signature.item`: `true` or `false`.
public struct TrustStore: Sendable {
    static let senderService = "sealedpush.trusted-sender"
    static let policyService = "sealedpush.policy"
    static let requireSignatureAccount = "require-signature"

    /// The store holding the trust items.
    public let store: KeychainStore

    /// Trust kept in `store`.
    public init(store: KeychainStore) { self.store = store }

    /// Trusts a sender key; returns `false` if it was already trusted. Adding a rotated sender key
    /// keeps the previous one trusted until it is removed.
    @discardableResult
    public func add(_ record: SenderKeyRecord) throws(KeychainError) -> Bool {
        do {
            try store.add(itemClass: .genericPassword, service: Self.senderService, account: record.keyID.hex,
                          data: SecureBytes(record.jsonBytes), label: "trusted sender key \(record.keyID.hex)",
                          accessibility: .alwaysThisDeviceOnly)
            return true
        } catch .duplicateItem {
            return false
        }
    }

    /// Every trusted sender key, ordered by key id.
    public func list() throws(KeychainError) -> [SenderKeyRecord] {
        let items: [KeychainItem]
        do {
            items = try store.copyMatching(KeychainQuery(itemClass: .genericPassword, accessGroup: store.accessGroups[0],
                                                         service: Self.senderService, limit: .all, returnData: true))
        } catch .itemNotFound { return [] }
        var out: [SenderKeyRecord] = []
        for item in items {
            let record: SenderKeyRecord
            do { record = try SenderKeyRecord(jsonBytes: item.data!.unsafeCopyToArray()) } catch {
                throw .decode(path: item.account, why: "the trusted sender record is malformed: \(error.description)")
            }
            guard record.keyID.hex == item.account else {
                throw .authFailed(path: item.account, why: "the trusted sender record is filed under another key id")
            }
            out.append(record)
        }
        return out.sorted { $0.keyID < $1.keyID }
    }

    /// Stops trusting a sender key; throws `itemNotFound` if it was not trusted.
    public func remove(_ keyID: KeyID) throws(KeychainError) {
        try store.delete(KeychainQuery(itemClass: .genericPassword, accessGroup: store.accessGroups[0],
                                       service: Self.senderService, account: keyID.hex))
    }

    /// Whether unsigned messages are refused (default `false`).
    public func requireSignature() throws(KeychainError) -> Bool {
        do {
            let item = try store.read(itemClass: .genericPassword, service: Self.policyService,
                                      account: Self.requireSignatureAccount, accessGroup: store.accessGroups[0])
            return item.data == SecureBytes(Array("true".utf8))
        } catch .itemNotFound { return false }
    }

    /// Sets whether unsigned messages are refused.
    public func setRequireSignature(_ required: Bool) throws(KeychainError) {
        try store.modify(itemClass: .genericPassword, service: Self.policyService, account: Self.requireSignatureAccount,
                         accessGroup: store.accessGroups[0], accessibility: .alwaysThisDeviceOnly) { _ in
            SecureBytes(Array((required ? "true" : "false").utf8))
        }
    }

    /// The receiver policy these settings give: trusted senders, signature requirement, clock skew (default 300 s).
    public func receiverPolicy(clockSkewSeconds: Int64 = WireFormat.defaultClockSkewSeconds,
                               replayWindowSeconds: Int64 = ReceiverPolicy.defaultReplayWindowSeconds) throws(KeychainError) -> ReceiverPolicy {
        ReceiverPolicy(trustedSenders: try list().map(\.publicKey), requireSignature: try requireSignature(),
                       clockSkewSeconds: clockSkewSeconds, replayWindowSeconds: replayWindowSeconds)
    }
}
