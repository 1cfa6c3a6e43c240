import Foundation
import Synchronization
import Logging
import SealedPushCrypto
import SealedPushKeychain
import SealedPushReceiver
import SealedPushSender
import SealedPushWire

/// A benchmark failure: the work did not do what it was supposed to (a figure for broken work would be meaningless).
struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The sender's work: complete APNs payloads from a `SecretMessage` and a device key record.
struct SenderBench {
    let record: DeviceKeyRecord
    let unsigned: NotificationSender
    let signed: NotificationSender
    let message = SecretMessage(title: "Agent K", body: "The eagle lands at noon.")

    /// One JSONL request per line, as `sealedpush seal --batch` reads them.
    let block: [UInt8]
    let lines: [Range<Int>]

    init(record: DeviceKeyRecord, signer: SigningKeyPair) throws {
        self.record = record
        unsigned = try NotificationSender()
        signed = try NotificationSender(signer: signer)
        var block: [UInt8] = []
        var lines: [Range<Int>] = []
        for n in 0..<64 {
            let start = block.count
            block.append(contentsOf: #"{"to":"#.utf8)
            block.append(contentsOf: record.jsonBytes)
            block.append(contentsOf: #","title":"Agent K","body":"The eagle lands at noon.","thread_id":"ops-\#(n % 8)"}"#.utf8)
            lines.append(start..<block.count)
            block.append(0x0a)
        }
        self.block = block
        self.lines = lines
    }

    /// The padded length both senders produce for the benchmark message (should be the 256-byte bucket).
    func paddedLengths() throws -> (unsigned: Int, signed: Int) {
        (try unsigned.seal(message, to: record).paddedLength, try signed.seal(message, to: record).paddedLength)
    }

    /// `n` complete payloads through `NotificationSender.seal`.
    func seal(_ sender: NotificationSender, _ n: Int) throws {
        var bytes = 0
        for _ in 0..<n { bytes &+= try sender.seal(message, to: record).payload.count }
        if bytes == 0 && n > 0 { throw BenchFailure("sealing produced no payload bytes") }
    }

    /// `n` JSONL lines through `JSONLSealer.process`, on this thread (no worker fan-out).
    func batch(_ sender: NotificationSender, _ n: Int) throws {
        let sealer = JSONLSealer(sender: sender)
        var out: [UInt8] = []
        out.reserveCapacity(1 << 20)
        var failures = 0
        let span = block.span
        for i in 0..<n {
            let outcome = sealer.process(line: span.extracting(lines[i % lines.count]), number: i + 1, into: &out)
            if outcome != .sealed { failures += 1 }
            if out.count > 1 << 19 { out.removeAll(keepingCapacity: true) }
        }
        if failures > 0 { throw BenchFailure("\(failures) of \(n) batch lines failed: \(String(decoding: out.suffix(300), as: UTF8.self))") }
    }
}

/// The receiver's work: a device keychain store, payloads sealed to its active key, and opens.
final class ReceiverBench {
    let root: URL
    let keyring: DeviceKeyring
    let signer: SigningKeyPair
    let policy: ReceiverPolicy
    /// The first key ever generated (retired once the store has rotated).
    let firstRecord: DeviceKeyRecord
    private(set) var activeRecord: DeviceKeyRecord
    private(set) var retiredCount = 0

    /// Payloads in flight, cycled through by the open loops.
    private(set) var unsignedPayloads: [[UInt8]] = []
    private(set) var signedPayloads: [[UInt8]] = []
    private(set) var oldestKeyPayloads: [[UInt8]] = []

    static let grace: Duration = .seconds(10 * 365 * 86_400)
    static let poolSize = 32

    init(root: URL, signer: SigningKeyPair) throws {
        self.root = root
        self.signer = signer
        policy = ReceiverPolicy(trustedSenders: [signer.publicKey])
        let ring = try Self.keychain { () throws(KeychainError) in try DeviceKeyring(store: KeychainStore(url: root)) }
        keyring = ring
        let first = try Self.keychain { () throws(KeychainError) in try ring.generate() }
        firstRecord = first
        activeRecord = first
    }

    static func keychain<R>(_ body: () throws(KeychainError) -> R) throws -> R {
        do { return try body() } catch { throw BenchFailure("keychain: \(error.description)") }
    }

    /// Rotates (with a long grace) until `count` keys are retired, then reseals the payload pools.
    func retire(until count: Int) throws {
        while retiredCount < count {
            activeRecord = try Self.keychain { () throws(KeychainError) in try keyring.rotate(grace: Self.grace) }
            retiredCount += 1
        }
        let unsignedSender = try NotificationSender()
        let signedSender = try NotificationSender(signer: signer)
        let message = SecretMessage(title: "Agent K", body: "The eagle lands at noon.")
        unsignedPayloads = try (0..<Self.poolSize).map { _ in try unsignedSender.seal(message, to: activeRecord).payload }
        signedPayloads = try (0..<Self.poolSize).map { _ in try signedSender.seal(message, to: activeRecord).payload }
        oldestKeyPayloads = try (0..<Self.poolSize).map { _ in try unsignedSender.seal(message, to: firstRecord).payload }
    }

    /// The `ENCRYPTED_DATA` of an APNs payload, as the extension finds it in userInfo.
    @inline(__always)
    static func encryptedData(_ payload: [UInt8]) throws -> String {
        guard case let .object(root) = try JSON.parse(payload), let value = root[WireFormat.encryptedDataKey]?.stringValue else {
            throw BenchFailure("a benchmark payload has no ENCRYPTED_DATA")
        }
        return value
    }

    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    /// `n` complete opens in a warm extension process: one opened store, its keys looked up through
    /// `CachedDeviceKeyring` (one 8-byte read of the store's change counter per message).
    func openWarm(_ payloads: [[UInt8]], _ n: Int) throws {
        let keys = try cachedKeys()
        let opener = MessageOpener(keys: keys, policy: policy)
        let now = Self.now
        for i in 0..<n {
            let opened = try opener.open(encryptedData: Self.encryptedData(payloads[i % payloads.count]), now: now)
            if opened.paddedLength == 0 { throw BenchFailure("opened an empty message") }
        }
        if n > 1 && keys.statistics.hits == 0 { throw BenchFailure("the warm key cache never hit") }
    }

    /// `n` complete opens with one opened store and `DeviceKeyring` reading the key's files every time.
    func openWarmUncached(_ payloads: [[UInt8]], _ n: Int) throws {
        let store = try Self.keychain { () throws(KeychainError) in try KeychainStore(url: root, create: false) }
        let opener = MessageOpener(keys: DeviceKeyring(store: store), policy: policy)
        let now = Self.now
        for i in 0..<n {
            let opened = try opener.open(encryptedData: Self.encryptedData(payloads[i % payloads.count]), now: now)
            if opened.paddedLength == 0 { throw BenchFailure("opened an empty message") }
        }
    }

    /// `n` complete opens, each with a newly opened store and keyring (a fresh extension process).
    func openCold(_ payloads: [[UInt8]], _ n: Int) throws {
        let now = Self.now
        for i in 0..<n {
            let store = try Self.keychain { () throws(KeychainError) in try KeychainStore(url: root, create: false) }
            let opener = MessageOpener(keys: DeviceKeyring(store: store), policy: policy)
            let opened = try opener.open(encryptedData: Self.encryptedData(payloads[i % payloads.count]), now: now)
            if opened.paddedLength == 0 { throw BenchFailure("opened an empty message") }
        }
    }

    /// `n` key lookups alone (`DeviceKeyring.lookUpKey(id:)`) on one opened store: the keychain's share of an open.
    func lookUpOnly(_ n: Int) throws {
        let keyring = DeviceKeyring(store: try Self.keychain { () throws(KeychainError) in try KeychainStore(url: root, create: false) })
        let id = activeRecord.keyID
        for _ in 0..<n {
            guard case .found = keyring.lookUpKey(id: id) else { throw BenchFailure("the active key was not found") }
        }
    }

    /// `n` complete opens with the key pairs held in memory (no keychain): what an open costs
    /// apart from the key lookup.
    func openWithKeysInMemory(_ payloads: [[UInt8]], _ n: Int) throws {
        let pair = try Self.keychain { () throws(KeychainError) in try keyring.activeKeyPair() }
        let opener = MessageOpener(keys: MemoryKeys(pairs: [pair.keyID: pair]), policy: policy)
        let now = Self.now
        for i in 0..<n {
            let opened = try opener.open(encryptedData: Self.encryptedData(payloads[i % payloads.count]), now: now)
            if opened.paddedLength == 0 { throw BenchFailure("opened an empty message") }
        }
    }

    /// `n` notifications through the extension's own entry point, from what iOS hands it: a
    /// `NotificationRequest` whose payload the system has already parsed. A new
    /// `SecretMessageExtension` per notification (as the simulator makes them) over one cached
    /// keyring: `ENCRYPTED_DATA`, key lookup, open, unpad, body JSON, checks, and the decrypted
    /// content built and delivered. Throws at the first notification that is not decrypted.
    func extensionWarm(_ requests: [NotificationRequest], keys: CachedDeviceKeyring, _ n: Int) throws {
        var logger = Logger(label: "sealedpush.extension")
        logger.logLevel = .error
        let policy = self.policy
        let configuration = SecretMessageExtension.Configuration(
            keys: keys, policy: { () throws(OpenFailure) -> ReceiverPolicy in policy }, replayGuard: nil, logger: logger)
        for i in 0..<n {
            let serviceExtension = SecretMessageExtension(configuration: configuration)
            let delivery = serviceExtension.open(requests[i % requests.count])
            guard delivery.outcome == .decrypted else {
                throw BenchFailure("notification \(i) was not decrypted (reason \(delivery.outcome.reason.map { "\($0)" } ?? "none"))")
            }
        }
    }

    /// Payloads as the requests iOS would hand the extension (parsed once, outside the timing).
    func requests(_ payloads: [[UInt8]]) throws -> [NotificationRequest] {
        try payloads.map { payload throws -> NotificationRequest in
            guard case let .object(object) = try JSON.parse(payload) else { throw BenchFailure("a benchmark payload is not an object") }
            return NotificationRequest(identifier: "bench", payload: object)
        }
    }

    /// A cached keyring over a newly opened store (what a warm extension process holds).
    func cachedKeys() throws -> CachedDeviceKeyring {
        CachedDeviceKeyring(keyring: DeviceKeyring(store: try Self.keychain { () throws(KeychainError) in
            try KeychainStore(url: root, create: false)
        }))
    }
}

/// Device keys held in memory, for measuring an open without the keychain.
struct MemoryKeys: DeviceKeyProvider {
    let pairs: [KeyID: BoxKeyPair]
    func lookUpKey(id keyID: KeyID) -> KeyLookup { pairs[keyID].map { .found($0) } ?? .unknown }
}

/// The replay cache alone: a table filled to its capacity, then one new id recorded per operation.
final class ReplayBench: Sendable {
    let cache: ReplayCache
    let next = Mutex(0)
    let kid = KeyID(publicKey: [UInt8](repeating: 7, count: 32))

    init(directory: URL) throws {
        cache = ReplayCache(store: try KeychainStore(url: directory))
        try record(ReplayCache.defaultCapacity)
    }

    func record(_ n: Int) throws {
        let start = next.withLock { value in
            defer { value += n }
            return value
        }
        for i in start..<(start + n) {
            guard cache.recordIfNew(messageID: "bench-\(i)", requestIdentifier: "request-\(i)", keyID: kid, expiresAt: .max, now: 1) else {
                throw BenchFailure("the replay cache refused a new id")
            }
        }
    }
}
