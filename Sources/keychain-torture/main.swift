// keychain-torture: the keychain tests run this as separate processes to exercise the store across
// process boundaries — concurrent writers, readers during writes, rotations during decryption, and
// SIGKILL at arbitrary points. Every mode prints one summary line and exits 0 on success, 1 on a
// failure (with the error on stderr), 2 on bad usage.
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
      writer ROOT ITEMS          forever: generation g = 1, 2, …: set items x0..x(ITEMS-1) to g (for SIGKILL tests)
      rotate ROOT N              N device-key rotations (N = 0: forever)
      decrypt ROOT N             N rounds: seal to the active key and to the first key, open both with a cold keyring

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
    FileHandle.standardOutput.write(Data("writer starting at \(generation)\n".utf8))
    while true {
        generation += 1
        for i in 0..<items {
            do {
                try store.modify(itemClass: .genericPassword, service: "torture", account: "x\(i)") { _ in
                    SecureBytes(Array(String(generation).utf8))
                }
            } catch { fail("writer: \(error.description)") }
        }
    }

case "rotate":
    let n = intArg(3)
    let keyring = DeviceKeyring(store: openStore())
    do {
        if (try? keyring.export()) == nil { try keyring.generate() }
        var i = 0
        while n == 0 || i < n {
            try keyring.rotate(grace: .seconds(86_400))
            i += 1
        }
    } catch { fail("rotate: \(error.description)") }
    print("rotate ok \(n)")

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

default:
    usage()
}
