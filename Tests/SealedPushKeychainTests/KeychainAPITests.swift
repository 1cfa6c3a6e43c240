import Foundation
import Testing
import SealedPushCrypto
@testable import SealedPushKeychain

/// The error a throwing body raised, or `nil`.
func caught(_ body: () throws -> Void) -> KeychainError? {
    do { try body(); return nil } catch let error as KeychainError { return error } catch {
        Issue.record("expected a KeychainError, got \(error)")
        return nil
    }
}

extension KeychainError {
    /// The case, by name (from the case itself, not from the message).
    var name: String {
        switch self {
        case .duplicateItem: return "duplicateItem"
        case .itemNotFound: return "itemNotFound"
        case .storeNotFound: return "storeNotFound"
        case .interactionNotAllowed: return "interactionNotAllowed"
        case .missingEntitlement: return "missingEntitlement"
        case .decode: return "decode"
        case .authFailed: return "authFailed"
        case .param: return "param"
        case .insecurePermissions: return "insecurePermissions"
        case .notOwner: return "notOwner"
        case .busy: return "busy"
        case .io: return "io"
        case .keychainStatus: return "keychainStatus"
        case .activeKeyExists: return "activeKeyExists"
        case .noActiveKey: return "noActiveKey"
        case .activeKeyRefused: return "activeKeyRefused"
        case .keyNotUsable: return "keyNotUsable"
        case .nextKeyExists: return "nextKeyExists"
        case .notNextKey: return "notNextKey"
        case .nextKeyNotExported: return "nextKeyNotExported"
        }
    }
}

@Suite("Keychain API semantics")
struct KeychainAPITests {
    @Test("add then copy-matching returns the data and the attributes")
    func addAndRead() throws {
        let dir = try TempDirectory()
        let clock = TestClock()
        let store = try KeychainStore(url: dir.store, clock: clock.wall)
        try store.add(itemClass: .genericPassword, service: "svc", account: "alice", data: secret("s3cret"), label: "Alice",
                      accessibility: .whenUnlocked, applicationTag: [1, 2, 3])
        let item = try store.read(itemClass: .genericPassword, service: "svc", account: "alice")
        #expect(text(item.data) == "s3cret")
        #expect(item.label == "Alice")
        #expect(item.accessibility == .whenUnlocked)
        #expect(item.applicationTag == [1, 2, 3])
        #expect(item.accessGroup == KeychainStore.defaultAccessGroup)
        #expect(item.creationDate == clock.current)
        #expect(item.modificationDate == clock.current)
        // Without returnData, no data.
        let attrs = try store.copyMatching(KeychainQuery(service: "svc"))
        #expect(attrs.count == 1 && attrs[0].data == nil)
    }

    @Test("a duplicate add is duplicateItem; the original is untouched")
    func duplicateAdd() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        try store.add(itemClass: .key, service: "svc", account: "a", data: secret("one"))
        let error = caught { try store.add(itemClass: .key, service: "svc", account: "a", data: secret("two")) }
        #expect(error?.name == "duplicateItem")
        #expect(text(try store.read(itemClass: .key, service: "svc", account: "a").data) == "one")
        // Same service and account in another class is a different item.
        try store.add(itemClass: .genericPassword, service: "svc", account: "a", data: secret("three"))
    }

    @Test("update of a missing item is itemNotFound; update changes data, label and modification date")
    func updateSemantics() throws {
        let dir = try TempDirectory()
        let clock = TestClock()
        let store = try KeychainStore(url: dir.store, clock: clock.wall)
        let missing = caught { try store.update(KeychainQuery(service: "nope"), with: KeychainUpdate(data: secret("x"))) }
        #expect(missing?.name == "itemNotFound")
        try store.add(itemClass: .genericPassword, service: "svc", account: "a", data: secret("old"), label: "L1")
        clock.advance(60)
        let n = try store.update(KeychainQuery(service: "svc", account: "a"), with: KeychainUpdate(data: secret("new"), label: .set("L2")))
        #expect(n == 1)
        let item = try store.read(itemClass: .genericPassword, service: "svc", account: "a")
        #expect(text(item.data) == "new")
        #expect(item.label == "L2")
        #expect(item.modificationDate == clock.current)
        #expect(item.creationDate == clock.current.addingTimeInterval(-60))
        // Attribute-only update keeps the data.
        try store.update(KeychainQuery(service: "svc"), with: KeychainUpdate(accessibility: .always))
        let again = try store.read(itemClass: .genericPassword, service: "svc", account: "a")
        #expect(text(again.data) == "new" && again.accessibility == .always)
        #expect(again.label == "L2", "a label left at .keep stays")
        try store.update(KeychainQuery(service: "svc"), with: KeychainUpdate(label: .remove))
        #expect(try store.read(itemClass: .genericPassword, service: "svc", account: "a").label == nil)
    }

    @Test("matching by each attribute, and the limit")
    func matchingAndLimit() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store, accessGroups: ["g1", "g2"])
        try store.add(itemClass: .key, service: "s1", account: "a", data: secret("1"), accessGroup: "g1", label: "x",
                      accessibility: .always, applicationTag: [9])
        try store.add(itemClass: .key, service: "s1", account: "b", data: secret("2"), accessGroup: "g1", label: "y")
        try store.add(itemClass: .genericPassword, service: "s2", account: "a", data: secret("3"), accessGroup: "g2", label: "x")
        func count(_ q: KeychainQuery) -> Int {
            var q = q
            q.limit = .all
            return (try? store.copyMatching(q).count) ?? 0
        }
        #expect(count(KeychainQuery()) == 3)
        #expect(count(KeychainQuery(itemClass: .key)) == 2)
        #expect(count(KeychainQuery(itemClass: .genericPassword)) == 1)
        #expect(count(KeychainQuery(accessGroup: "g2")) == 1)
        #expect(count(KeychainQuery(service: "s1")) == 2)
        #expect(count(KeychainQuery(account: "a")) == 2)
        #expect(count(KeychainQuery(label: "x")) == 2)
        #expect(count(KeychainQuery(accessibility: .always)) == 1)
        #expect(count(KeychainQuery(applicationTag: [9])) == 1)
        #expect(count(KeychainQuery(service: "s1", label: "y")) == 1)
        #expect(count(KeychainQuery(service: "none")) == 0)
        #expect(try store.copyMatching(KeychainQuery()).count == 1)  // default limit .one
        #expect(try store.copyMatching(KeychainQuery(limit: .max(2))).count == 2)
        #expect(caught { _ = try store.copyMatching(KeychainQuery(limit: .max(0))) }?.name == "param")
        #expect(caught { _ = try store.copyMatching(KeychainQuery(service: "none")) }?.name == "itemNotFound")
    }

    @Test("delete removes matching items and their files; deleting nothing is itemNotFound")
    func deleteSemantics() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        try store.add(itemClass: .key, service: "s", account: "a", data: secret("1"))
        try store.add(itemClass: .key, service: "s", account: "b", data: secret("2"))
        #expect(try store.delete(KeychainQuery(service: "s", account: "a")) == 1)
        #expect(caught { _ = try store.read(itemClass: .key, service: "s", account: "a") }?.name == "itemNotFound")
        #expect(try store.delete(KeychainQuery(service: "s")) == 1)
        #expect(caught { try store.delete(KeychainQuery(service: "s")) }?.name == "itemNotFound")
        #expect(allFiles(under: dir.store).filter { $0.pathExtension == "item" }.isEmpty)
    }

    @Test("empty service or account and unsafe group names are param errors")
    func parameters() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        #expect(caught { try store.add(itemClass: .key, service: "", account: "a", data: secret("1")) }?.name == "param")
        #expect(caught { try store.add(itemClass: .key, service: "s", account: "", data: secret("1")) }?.name == "param")
        #expect(caught { _ = try KeychainStore(url: dir.store, accessGroups: ["../evil"]) }?.name == "param")
        // Odd characters in service and account are escaped, not refused, and round-trip.
        try store.add(itemClass: .key, service: "a/b@c", account: ".hidden %", data: secret("ok"))
        #expect(text(try store.read(itemClass: .key, service: "a/b@c", account: ".hidden %").data) == "ok")
    }

    @Test("modify is read-modify-write and creates a missing item")
    func modify() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        for _ in 0..<5 {
            try store.modify(itemClass: .genericPassword, service: "c", account: "n") { old in
                secret(String((Int(text(old) ?? "0") ?? 0) + 1))
            }
        }
        #expect(text(try store.read(itemClass: .genericPassword, service: "c", account: "n").data) == "5")
    }
}

@Suite("Access groups")
struct AccessGroupTests {
    @Test("a caller sees only its groups; naming another is missingEntitlement")
    func isolation() throws {
        let dir = try TempDirectory()
        let app = try KeychainStore(url: dir.store, accessGroups: ["app", "shared"])
        try app.add(itemClass: .key, service: "s", account: "private", data: secret("p"), accessGroup: "app")
        try app.add(itemClass: .key, service: "s", account: "common", data: secret("c"), accessGroup: "shared")
        let ext = try KeychainStore(url: dir.store, accessGroups: ["shared"])
        #expect(try ext.copyMatching(KeychainQuery(limit: .all)).map(\.account) == ["common"])
        for body: () throws -> Void in [
            { _ = try ext.copyMatching(KeychainQuery(accessGroup: "app")) },
            { _ = try ext.read(itemClass: .key, service: "s", account: "private", accessGroup: "app") },
            { try ext.add(itemClass: .key, service: "s", account: "x", data: secret("x"), accessGroup: "app") },
            { try ext.update(KeychainQuery(accessGroup: "app"), with: KeychainUpdate(data: secret("y"))) },
            { try ext.delete(KeychainQuery(accessGroup: "app")) },
        ] {
            let error = caught(body)
            #expect(error == .missingEntitlement(group: "app"))
            #expect(error?.description.contains("not entitled") == true)
        }
        // An unentitled caller's broad delete does not touch the other group.
        try ext.delete(KeychainQuery(limit: .all))
        #expect(text(try app.read(itemClass: .key, service: "s", account: "private").data) == "p")
    }
}

@Suite("Device lock states")
struct LockStateTests {
    @Test("fresh store is unlocked; reboot, unlock and lock move between states; lock before unlock stays beforeFirstUnlock")
    func transitions() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        #expect(try store.deviceLockState() == .unlocked)
        #expect(try store.lock() == .locked)
        #expect(try store.reboot() == .beforeFirstUnlock)
        #expect(try store.lock() == .beforeFirstUnlock)
        #expect(try store.unlock() == .unlocked)
        #expect(try store.lock() == .locked)
        // Another opening (another process) sees the persisted state.
        #expect(try KeychainStore(url: dir.store).deviceLockState() == .locked)
    }

    static let expected: [Accessibility: Set<DeviceLockState>] = [
        .whenUnlocked: [.unlocked], .whenUnlockedThisDeviceOnly: [.unlocked],
        .afterFirstUnlock: [.unlocked, .locked], .afterFirstUnlockThisDeviceOnly: [.unlocked, .locked],
        .always: [.unlocked, .locked, .beforeFirstUnlock], .alwaysThisDeviceOnly: [.unlocked, .locked, .beforeFirstUnlock],
    ]

    @Test("every accessibility class × every device state", arguments: Accessibility.allCases)
    func matrix(_ accessibility: Accessibility) throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        try store.add(itemClass: .key, service: "s", account: "a", data: secret("v"), accessibility: accessibility)
        for state in DeviceLockState.allCases {
            switch state {
            case .unlocked: try store.unlock()
            case .locked: try store.unlock(); try store.lock()
            case .beforeFirstUnlock: try store.reboot()
            }
            #expect(try store.deviceLockState() == state)
            let readable = Self.expected[accessibility]!.contains(state)
            #expect(accessibility.isAvailable(in: state) == readable)
            let error = caught { _ = try store.read(itemClass: .key, service: "s", account: "a") }
            if readable {
                #expect(error == nil, "\(accessibility) should be readable when \(state)")
            } else {
                #expect(error?.name == "interactionNotAllowed", "\(accessibility) should not be readable when \(state)")
            }
            // Attribute-only queries work in every state.
            #expect(try store.copyMatching(KeychainQuery(service: "s")).count == 1)
        }
    }

    @Test("device keys default to afterFirstUnlockThisDeviceOnly and answer .locked before first unlock")
    func deviceKeyLocked() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        let keyring = DeviceKeyring(store: store)
        let record = try keyring.generate()
        let item = try store.copyMatching(KeychainQuery(itemClass: .key, account: record.keyID.hex))[0]
        #expect(item.accessibility == .afterFirstUnlockThisDeviceOnly)
        try store.reboot()
        guard case .locked = keyring.lookUpKey(id: record.keyID) else { Issue.record("expected .locked"); return }
        // Listing and export still work: only secret data is gated.
        #expect(try keyring.list().count == 1)
        #expect(try keyring.export() == record)
        try store.unlock(); try store.lock()
        guard case .found = keyring.lookUpKey(id: record.keyID) else { Issue.record("expected .found after first unlock"); return }
    }
}

@Suite("Permissions")
struct PermissionTests {
    @Test("a 0644 item file is refused with the chmod that fixes it")
    func itemFileMode() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        try store.add(itemClass: .key, service: "s", account: "a", data: secret("v"))
        let file = try #require(allFiles(under: dir.store).first { $0.pathExtension == "item" })
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path)
        let error = caught { _ = try store.read(itemClass: .key, service: "s", account: "a") }
        #expect(error?.name == "insecurePermissions")
        #expect(error?.description.contains("chmod 600 '\(file.path)'") == true)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        #expect(caught { _ = try store.read(itemClass: .key, service: "s", account: "a") } == nil)
    }

    @Test("every file and directory docs/keychain.md lists is checked at open: generation, .lock, lock-state, tmp, replay")
    func everyListedFileIsChecked() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        try store.add(itemClass: .key, service: "s", account: "a", data: secret("v"))
        try store.lock()
        #expect(ReplayCache(store: store).recordIfNew(messageID: "m", keyID: KeyID(publicKey: [UInt8](repeating: 1, count: 32)),
                                                          expiresAt: 2_000_000_000, now: 1_800_000_000))
        let root = dir.store.path
        let files = [".lock", "generation", "lock-state", "replay/replay-v3.db", "replay/replay.lock"]
        let directories = ["tmp", "replay"]
        for name in files + directories {
            let path = root + "/" + name
            #expect(FileManager.default.fileExists(atPath: path), "\(name) was not made")
            let isDirectory = directories.contains(name)
            try FileManager.default.setAttributes([.posixPermissions: isDirectory ? 0o755 : 0o644], ofItemAtPath: path)
            let error = caught { _ = try KeychainStore(url: dir.store) }
            #expect(error == .insecurePermissions(path: path, mode: isDirectory ? 0o755 : 0o644,
                                                  fix: isDirectory ? "chmod 700 '\(path)'" : "chmod 600 '\(path)'"), "\(name)")
            try FileManager.default.setAttributes([.posixPermissions: isDirectory ? 0o700 : 0o600], ofItemAtPath: path)
            #expect(caught { _ = try KeychainStore(url: dir.store) } == nil)
        }
    }

    @Test("a 0755 store or group directory is refused with chmod 700")
    func directoryMode() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        try store.add(itemClass: .key, service: "s", account: "a", data: secret("v"))
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.store.path)
        let error = caught { _ = try KeychainStore(url: dir.store) }
        #expect(error?.name == "insecurePermissions")
        #expect(error?.description.contains("chmod 700 '\(dir.store.path)'") == true)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: dir.store.path)
        let group = dir.store.appendingPathComponent("items/\(KeychainStore.defaultAccessGroup)")
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: group.path)
        let groupError = caught { _ = try KeychainStore(url: dir.store).read(itemClass: .key, service: "s", account: "a") }
        #expect(groupError?.description.contains("chmod 700 '\(group.path)'") == true)
    }

    @Test("the store creates 0700 directories and 0600 files")
    func createdModes() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        try store.add(itemClass: .key, service: "s", account: "a", data: secret("v"))
        try store.lock()
        _ = ReplayCache(store: store).recordIfNew(messageID: "m", keyID: KeyID(publicKey: [UInt8](repeating: 1, count: 32)),
                                                  expiresAt: 10, now: 1)
        let e = try #require(FileManager.default.enumerator(atPath: dir.store.path))
        var checked = 0
        for case let rel as String in e {
            let attrs = try FileManager.default.attributesOfItem(atPath: dir.store.appendingPathComponent(rel).path)
            let mode = (attrs[.posixPermissions] as! NSNumber).intValue
            let isDir = attrs[.type] as? FileAttributeType == .typeDirectory
            #expect(mode == (isDir ? 0o700 : 0o600), "\(rel) has mode \(String(mode, radix: 8))")
            checked += 1
        }
        #expect(checked >= 6)
    }
}

@Suite("Tamper detection")
struct TamperTests {
    func setUp() throws -> (TempDirectory, KeychainStore, URL, URL) {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        try store.add(itemClass: .key, service: "s", account: "a", data: secret("alpha-secret"), label: "A")
        try store.add(itemClass: .key, service: "s", account: "b", data: secret("bravo-secret"), label: "B")
        let files = allFiles(under: dir.store).filter { $0.pathExtension == "item" }.sorted { $0.path < $1.path }
        return (dir, store, files[0], files[1])
    }

    func readA(_ store: KeychainStore) -> KeychainError? { caught { _ = try store.read(itemClass: .key, service: "s", account: "a") } }

    @Test("the secret never appears in clear on disk")
    func noPlaintext() throws {
        let (dir, _, _, _) = try setUp()
        for file in allFiles(under: dir.store) {
            #expect(!contains(Array(try Data(contentsOf: file)), Array("alpha-secret".utf8)))
        }
    }

    @Test("flipping any one byte of an item file is detected", arguments: [0, 10, 40, 80, -40, -10, -2])
    func flipByte(_ position: Int) throws {
        let (dir, store, a, _) = try setUp()
        defer { withExtendedLifetime(dir) {} }
        var bytes = Array(try Data(contentsOf: a))
        let index = position >= 0 ? position : bytes.count + position
        bytes[index] ^= 0x01
        try Data(bytes).write(to: a)
        let error = readA(store)
        #expect(["decode", "authFailed"].contains(error?.name ?? "none"), "flip at \(index): \(String(describing: error))")
    }

    @Test("a truncated item file is detected", arguments: [0, 1, 50, -30, -1])
    func truncate(_ keep: Int) throws {
        let (dir, store, a, _) = try setUp()
        defer { withExtendedLifetime(dir) {} }
        let bytes = Array(try Data(contentsOf: a))
        try Data(bytes.prefix(keep >= 0 ? keep : bytes.count + keep)).write(to: a)
        #expect(["decode", "authFailed"].contains(readA(store)?.name ?? "none"))
    }

    @Test("swapping two items' files is detected")
    func swap() throws {
        let (dir, store, a, b) = try setUp()
        defer { withExtendedLifetime(dir) {} }
        let da = try Data(contentsOf: a), db = try Data(contentsOf: b)
        try db.write(to: a)
        try da.write(to: b)
        #expect(readA(store)?.name == "authFailed")
        #expect(caught { _ = try store.copyMatching(KeychainQuery(limit: .all)) }?.name == "authFailed")
    }

    @Test("changing an attribute in place (label, accessibility, account) is detected")
    func editAttribute() throws {
        for (from, to) in [("\"label\":\"A\"", "\"label\":\"Z\""),
                           ("\"accessible\":\"afterFirstUnlockThisDeviceOnly\"", "\"accessible\":\"always\""),
                           ("\"account\":\"a\"", "\"account\":\"b\"")] {
            let (dir, store, a, _) = try setUp()
        defer { withExtendedLifetime(dir) {} }
            let original = String(decoding: try Data(contentsOf: a), as: UTF8.self)
            #expect(original.contains(from))
            try Data(original.replacingOccurrences(of: from, with: to).utf8).write(to: a)
            #expect(readA(store)?.name == "authFailed", "edit \(from) -> \(to)")
        }
    }

    @Test("an item sealed under another store's key is detected")
    func otherStoreKey() throws {
        let (dir, store, _, _) = try setUp()
        let other = try TempDirectory()
        let otherStore = try KeychainStore(url: other.store)
        try otherStore.add(itemClass: .key, service: "s", account: "a", data: secret("forged"), label: "A")
        let forged = try #require(allFiles(under: other.store).first { $0.pathExtension == "item" })
        let target = try #require(allFiles(under: dir.store).first { $0.lastPathComponent == forged.lastPathComponent })
        try Data(contentsOf: forged).write(to: target)
        #expect(readA(store)?.name == "authFailed")
    }
}
