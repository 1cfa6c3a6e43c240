// keychain-torture: the keychain tests run this as separate processes to exercise the store across
// process boundaries — concurrent writers, readers during writes, rotations during decryption, and
// SIGKILL at arbitrary points, and faults (a store it may not write, a file size limit). Every mode
// prints one summary line and exits 0 on success, 1 on a failure (with the error on stderr), 2 on
// bad usage. The modes a test kills (`writer`, `rotate`) print `ready` once the store is open and
// one line per committed step, flushed, so the test can time its kill from the child's progress
// rather than from an assumed start-up time (sanitizer builds start several times slower).
import Foundation
import SealedPushCrypto
import SealedPushKeychain
import SealedPushWire

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("keychain-torture: \(message)\n".utf8))
    exit(1)
}

func usage() -> Never {
    FileHandle.standardError.write(Data("""
    usage: keychain-torture MODE ROOT [ARGS]
      counter ROOT NAME N        N read-modify-write increments of counter item NAME, plus N adds of its own items
      reader ROOT NAME N         N reads of counter item NAME (each must decode and authenticate)
      writer ROOT ITEMS          forever: generation g = 1, 2, …: set items x0..x(ITEMS-1) to g (for SIGKILL tests);
                                 prints `ready START`, then `gen G` after each complete generation
      rotate ROOT N              N device-key rotations (N = 0: forever); prints `ready KEYID`, then `rotated KEYID` after each
      outbox ROOT                forever: queue receipt mN in the receipt outbox; prints `ready`, then `queued N` after each
      decrypt ROOT N             N rounds: seal to the active key and to the first key, open both with a cold keyring
      fault ROOT [--as-uid UID] [--file-size-limit BYTES] OP…
                                 drops to UID (when root) and/or limits file sizes (RLIMIT_FSIZE, SIGXFSZ ignored),
                                 then runs each OP and prints `OP: ok`, `OP: error <message>` or, for replay,
                                 `replay: recorded` / `replay: refused`. OPs: read (item fault/a3), add (fault/new),
                                 update (fault/a0), modify (fault/a1), delete (fault/a2), rotate, lock (lock-state),
                                 replay (records message id fault-new)

    """.utf8))
    exit(2)
}

let args = CommandLine.arguments
guard args.count >= 3 else { usage() }
let mode = args[1]
let root = URL(fileURLWithPath: args[2])
func intArg(_ i: Int) -> Int {
    guard args.count > i, let n = Int(args[i]), n >= 0 else { usage() }
    return n
}

func openStore() -> KeychainStore {
    do { return try KeychainStore(url: root) } catch { fail("open: \(error.description)") }
}

/// Writes one line to stdout at once (FileHandle writes are unbuffered), so a test reading the pipe
/// sees it even if the process is killed right after.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func number(_ data: SecureBytes?) -> Int {
    guard let data else { return 0 }
    return Int(String(decoding: data.unsafeCopyToArray(), as: UTF8.self)) ?? -1
}

switch mode {
case "counter":
    guard args.count >= 5 else { usage() }
    let name = args[3]
    let n = intArg(4)
    let store = openStore()
    let pid = ProcessInfo.processInfo.processIdentifier
    do {
        for i in 0..<n {
            try store.modify(itemClass: .genericPassword, service: "torture", account: name) { old throws(KeychainError) in
                let value = number(old)
                guard value >= 0 else { throw .decode(path: name, why: "the counter is not a number") }
                return SecureBytes(Array(String(value + 1).utf8))
            }
            try store.add(itemClass: .genericPassword, service: "torture-own", account: "p\(pid)-\(i)",
                          data: SecureBytes(Array("v\(i)".utf8)))
        }
    } catch { fail("counter: \(error.description)") }
    print("counter ok \(n)")

case "reader":
    guard args.count >= 5 else { usage() }
    let name = args[3]
    let n = intArg(4)
    var seen = 0
    var last = 0
    for _ in 0..<n {
        // A cold store per read, as the extension would.
        let store = openStore()
        do {
            let item = try store.read(itemClass: .genericPassword, service: "torture", account: name)
            let value = number(item.data)
            guard value >= last else { fail("reader: the counter went back from \(last) to \(value)") }
            last = value
            seen += 1
        } catch .itemNotFound {
            continue  // not written yet
        } catch { fail("reader: \(error.description)") }
    }
    print("reader ok \(seen) last=\(last)")

case "writer":
    let items = intArg(3)
    let store = openStore()
    var generation = 0
    do {
        let existing = try? store.read(itemClass: .genericPassword, service: "torture", account: "x0")
        generation = number(existing?.data)
    }
    say("ready \(generation)")
    while true {
        generation += 1
        for i in 0..<items {
            do {
                try store.modify(itemClass: .genericPassword, service: "torture", account: "x\(i)") { _ in
                    SecureBytes(Array(String(generation).utf8))
                }
            } catch { fail("writer: \(error.description)") }
        }
        say("gen \(generation)")
    }

case "rotate":
    let n = intArg(3)
    let keyring = DeviceKeyring(store: openStore())
    do {
        if (try? keyring.export()) == nil { try keyring.generate() }
        say("ready \((try? keyring.export().keyID.hex) ?? "none")")
        var i = 0
        while n == 0 || i < n {
            let record = try keyring.rotate(grace: .seconds(86_400))
            say("rotated \(record.keyID.hex)")
            i += 1
        }
    } catch { fail("rotate: \(error.description)") }
    print("rotate ok \(n)")

case "outbox":
    // Forever: queue receipt `m<N>` in the device's outbox (receipts v1 §2); `queued N` once `enqueue` returned.
    let outbox = ReceiptOutboxStore(store: openStore())
    let token = Base64.encodeURLSafeNoPadding([UInt8](repeating: 7, count: 16))
    do {
        var n = (try outbox.entries().entries.last.map { Int($0.sequence) }) ?? 0
        say("ready \(n)")
        while true {
            n += 1
            try outbox.enqueue(url: "http://127.0.0.1:9/r", message: .delivered(id: "m\(n)", token: token, at: Int64(n), attachments: nil),
                               now: 1_795_000_000)
            say("queued \(n)")
        }
    } catch { fail("outbox: \(error)") }
case "decrypt":
    let n = intArg(3)
    var failures = 0
    var firstRecord: DeviceKeyRecord?
    for round in 0..<n {
        do {
            let record = try DeviceKeyring(store: openStore()).export()
            if firstRecord == nil { firstRecord = record }
            for (label, target) in [("active", record), ("first", firstRecord!)] {
                let body = MessageBody(kid: target.keyID, id: "m-\(round)-\(label)", issuedAt: Int64(Date().timeIntervalSince1970),
                                       alert: .init(title: "t", body: "round \(round)"))
                let envelope = try MessageSealer.seal(body: body, to: target.publicKey, signer: nil, padding: .bucket,
                                                      payloadOverhead: 200)
                // A cold keyring per notification, as the extension opens it.
                let opener = MessageOpener(keys: DeviceKeyring(store: openStore()))
                do {
                    let opened = try opener.open(encryptedData: envelope.base64, now: Int64(Date().timeIntervalSince1970))
                    if opened.body.alert.body != "round \(round)" { failures += 1 }
                } catch {
                    failures += 1
                    FileHandle.standardError.write(Data("round \(round) \(label) key \(target.keyID.hex): \(error.description)\n".utf8))
                }
            }
        } catch {
            failures += 1
            FileHandle.standardError.write(Data("round \(round): \(error)\n".utf8))
        }
    }
    print("decrypt rounds=\(n) failures=\(failures)")
    exit(failures == 0 ? 0 : 1)

case "fault":
    runFaults(Array(args.dropFirst(3)))

default:
    usage()
}

/// `fault` mode: set up the fault (fewer privileges, a file size limit), then try each operation on
/// a store the test prepared (items fault/a0…a3, a device key, a replay entry) and report each outcome.
func runFaults(_ rest: [String]) -> Never {
    var ops: [String] = []
    var uid: uid_t?
    var sizeLimit: rlim_t?
    var i = 0
    while i < rest.count {
        switch rest[i] {
        case "--as-uid":
            guard i + 1 < rest.count, let n = UInt32(rest[i + 1]) else { usage() }
            uid = n
            i += 2
        case "--file-size-limit":
            guard i + 1 < rest.count, let n = UInt64(rest[i + 1]) else { usage() }
            sizeLimit = rlim_t(n)
            i += 2
        default:
            ops.append(rest[i])
            i += 1
        }
    }
    if let sizeLimit {
        // write(2) past the limit then fails with EFBIG instead of the process dying of SIGXFSZ.
        signal(SIGXFSZ, SIG_IGN)
        var limit = rlimit()
        guard getrlimit(fileSizeResource(), &limit) == 0 else { fail("getrlimit: \(String(cString: strerror(errno)))") }
        limit.rlim_cur = sizeLimit
        guard setrlimit(fileSizeResource(), &limit) == 0 else { fail("setrlimit: \(String(cString: strerror(errno)))") }
    }
    if let uid, geteuid() == 0 {
        // Root ignores mode bits: become an ordinary user so the store's modes apply.
        guard setgroups(0, nil) == 0, setgid(gid_t(uid)) == 0, setuid(uid) == 0 else {
            fail("could not drop privileges to uid \(uid): \(String(cString: strerror(errno)))")
        }
        guard setuid(0) != 0, geteuid() == uid else { fail("privileges were not dropped: still able to become root") }
    }
    say("fault: uid=\(geteuid()) file-size-limit=\(sizeLimit.map { String($0) } ?? "none")")
    let store = openStore()
    let keyring = DeviceKeyring(store: store)
    for op in ops {
        do throws(KeychainError) {
            switch op {
            case "read":
                _ = try store.read(itemClass: .genericPassword, service: "fault", account: "a3")
            case "add":
                try store.add(itemClass: .genericPassword, service: "fault", account: "new", data: SecureBytes(Array("new".utf8)))
            case "update":
                try store.update(KeychainQuery(itemClass: .genericPassword, service: "fault", account: "a0"),
                                 with: KeychainUpdate(data: SecureBytes(Array("changed".utf8))))
            case "modify":
                try store.modify(itemClass: .genericPassword, service: "fault", account: "a1") { _ in SecureBytes(Array("changed".utf8)) }
            case "delete":
                try store.delete(KeychainQuery(itemClass: .genericPassword, service: "fault", account: "a2"))
            case "rotate":
                try keyring.rotate()
            case "lock":
                try store.lock()
            case "replay":
                // recordIfNew fails closed: an unusable cache refuses the message (and logs why on stderr).
                let now = Int64(Date().timeIntervalSince1970)
                let recorded = ReplayCache(store: store).recordIfNew(messageID: "fault-new", keyID: try keyring.export().keyID,
                                                                     expiresAt: now + 3600, now: now)
                say("replay: \(recorded ? "recorded" : "refused")")
                continue
            default:
                usage()
            }
            say("\(op): ok")
        } catch {
            say("\(op): error \(error.description)")
        }
    }
    exit(0)
}

/// `RLIMIT_FSIZE` as `setrlimit` takes it on this platform. (A function: a stored global declared
/// here in main.swift would still be zero — RLIMIT_CPU — when `runFaults` runs above.)
#if canImport(Glibc)
func fileSizeResource() -> __rlimit_resource_t { __rlimit_resource_t(RLIMIT_FSIZE.rawValue) }
#else
func fileSizeResource() -> Int32 { RLIMIT_FSIZE }
#endif
