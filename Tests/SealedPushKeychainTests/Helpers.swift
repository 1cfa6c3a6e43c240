import Foundation
import Synchronization
import Testing
import SealedPushCrypto
import SealedPushKeychain
import SealedPushTestSupport
import SealedPushWire

/// A fresh private (0700) directory for one test, removed when the value is released.
final class TempDirectory: Sendable {
    let url: URL

    init() throws {
        TestLogging.quiet()
        url = FileManager.default.temporaryDirectory.appendingPathComponent("kc-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// The store root inside the directory (created by the store itself).
    var store: URL { url.appendingPathComponent("store") }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let date: Mutex<Date>

    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        TestLogging.quiet()
        date = Mutex(start)
    }

    var now: @Sendable () -> Date { { [self] in self.date.withLock { $0 } } }
    /// This clock as the `WallClock` stores and keyrings take.
    var wall: WallClock { WallClock(now) }
    var current: Date { date.withLock { $0 } }
    var unix: Int64 { Int64(current.timeIntervalSince1970) }

    func advance(_ seconds: TimeInterval) { date.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

func secret(_ text: String) -> SecureBytes { SecureBytes(Array(text.utf8)) }

func text(_ data: SecureBytes?) -> String? { data.map { String(decoding: $0.unsafeCopyToArray(), as: UTF8.self) } }

/// Every regular file under `url` (recursively, hidden files included).
func allFiles(under url: URL) -> [URL] {
    guard let e = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
    return e.compactMap { $0 as? URL }.filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
}

/// Whether `needle` occurs anywhere in `haystack`.
func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
        if Array(haystack[i..<(i + needle.count)]) == needle { return true }
    }
    return false
}

/// Seals a small message to `record`, signed when `signer` is given, as a sender would.
func sealMessage(to record: DeviceKeyRecord, id: String, now: Int64, signer: SigningKeyPair? = nil) throws -> String {
    let body = MessageBody(kid: record.keyID, id: id, issuedAt: now, alert: .init(title: "Hi", body: "secret \(id)"),
                           sender: signer?.keyID)
    return try MessageSealer.seal(body: body, to: record.publicKey, signer: signer, padding: .bucket, payloadOverhead: 200).base64
}
