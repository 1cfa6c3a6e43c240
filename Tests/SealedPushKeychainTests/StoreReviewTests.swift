import Foundation
import Testing
import SealedPushCrypto
import SealedPushWire
@testable import SealedPushKeychain
#if canImport(Glibc)
import Glibc
#endif

// The "Store" findings of the 2026-11 security review (issue #22): ownership, permission bits,
// the writers' lock wait and the order of the durability syscalls.

/// One file or directory of a store, by its path under the root (`""` is the root itself).
struct StorePart: Sendable, CustomTestStringConvertible {
    let relativePath: String
    let isDirectory: Bool

    var testDescription: String { relativePath.isEmpty ? "the store root" : relativePath }

    /// Its path in the store at `root`, spelled as the store spells it in errors.
    func path(in root: URL) -> String { relativePath.isEmpty ? root.path : root.path + "/" + relativePath }

    /// Every file the store keeps (the item file is the one `openedStore` adds).
    static let files: [StorePart] = ["store.key", ".lock", "generation", "lock-state", "items/sealedpush/key@s@a.item",
                                     "replay/replay.db", "replay/replay.lock"].map { StorePart(relativePath: $0, isDirectory: false) }
    /// Every directory the store keeps, the root included.
    static let directories: [StorePart] = ["", "items", "items/sealedpush", "tmp", "replay"]
        .map { StorePart(relativePath: $0, isDirectory: true) }
    static let all = files + directories
}

/// A store with every file and directory of `StorePart.all` made: one item, a lock state, a replay cache.
func openedStore(_ dir: TempDirectory) throws -> KeychainStore {
    let store = try KeychainStore(url: dir.store)
    try store.add(itemClass: .key, service: "s", account: "a", data: secret("the-secret-value"))
    try store.lock()
    try store.unlock()
    #expect(ReplayCache(store: store).recordIfNew(messageID: "m", keyID: KeyID(publicKey: [UInt8](repeating: 1, count: 32)),
                                                  expiresAt: 2_000_000_000, now: 1_800_000_000))
    for part in StorePart.all {
        #expect(FileManager.default.fileExists(atPath: part.path(in: dir.store)), "\(part.testDescription) was not made")
    }
    return store
}

/// Opens the store at `dir` again and reads its item: touches every part of `StorePart.all`.
func reopenAndRead(_ dir: TempDirectory) -> KeychainError? {
    caught { _ = try KeychainStore(url: dir.store).read(itemClass: .key, service: "s", account: "a") }
}

@Suite("Store review: permission bits")
struct PermissionBitTests {
    /// The six group and other permission bits, one at a time.
    static let groupAndOtherBits: [UInt32] = [0o040, 0o020, 0o010, 0o004, 0o002, 0o001]

    @Test("each single group or other bit on any store file or directory is refused, naming the path and the chmod",
          arguments: StorePart.all, groupAndOtherBits)
    func eachBitIsRefused(part: StorePart, bit: UInt32) throws {
        let dir = try TempDirectory()
        _ = try openedStore(dir)
        let path = part.path(in: dir.store)
        let mode: UInt32 = (part.isDirectory ? 0o700 : 0o600) | bit
        #expect(chmod(path, mode_t(mode)) == 0)
        let error = reopenAndRead(dir)
        #expect(error == .insecurePermissions(path: path, mode: mode, fix: part.isDirectory ? "chmod 700 '\(path)'" : "chmod 600 '\(path)'"),
                "mode \(String(mode, radix: 8)) on \(part.testDescription)")
        #expect(error?.description.contains("the-secret-value") != true)
        #expect(chmod(path, mode_t(part.isDirectory ? 0o700 : 0o600)) == 0)
        #expect(reopenAndRead(dir) == nil)
    }

    @Test("0600 files and 0700 directories are accepted", arguments: StorePart.all)
    func ownerOnlyIsAccepted(part: StorePart) throws {
        let dir = try TempDirectory()
        _ = try openedStore(dir)
        #expect(chmod(part.path(in: dir.store), part.isDirectory ? 0o700 : 0o600) == 0)
        #expect(reopenAndRead(dir) == nil)
    }
}

@Suite("Store review: ownership")
struct OwnershipTests {
    /// A uid no test runs as.
    static let stranger: uid_t = 12345

    @Test("a store file or directory owned by another uid is refused, naming the path and the chown",
          .enabled(if: geteuid() == 0, "needs root to chown a file to another uid (the injected-owner test covers this without root)"),
          arguments: StorePart.all)
    func anotherOwnerIsRefused(part: StorePart) throws {
        let dir = try TempDirectory()
        _ = try openedStore(dir)
        let path = part.path(in: dir.store)
        #expect(lchown(path, Self.stranger, getegid()) == 0)
        let error = reopenAndRead(dir)
        #expect(error == .notOwner(path: path, owner: UInt32(Self.stranger), expected: UInt32(geteuid())),
                "\(part.testDescription) owned by uid \(Self.stranger): \(String(describing: error))")
        #expect(error?.description.contains("chown \(geteuid()) '\(path)'") == true)
        #expect(error?.description.contains("the-secret-value") != true)
        #expect(lchown(path, geteuid(), getegid()) == 0)
        #expect(reopenAndRead(dir) == nil)
    }

    @Test("with another uid injected as the expected owner, the store this process made is refused at its root")
    func injectedOwner() throws {
        let dir = try TempDirectory()
        _ = try openedStore(dir)
        let other = geteuid() &+ 1
        let error = StoreIO.$expectedOwner.withValue(other) { reopenAndRead(dir) }
        #expect(error == .notOwner(path: dir.store.path, owner: UInt32(geteuid()), expected: UInt32(other)))
        #expect(reopenAndRead(dir) == nil)
    }
}
