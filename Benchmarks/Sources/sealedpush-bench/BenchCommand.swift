import ArgumentParser
import Foundation
import SealedPushCrypto
import SealedPushKeychain
import SealedPushSender
import SealedPushWire

/// `sealedpush-bench`: sender and receiver throughput as ratios to bare libsodium, and memory.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sealedpush-bench",
        abstract: "Measure sealing and opening against raw libsodium sealed-box loops, and the receiver's memory.",
        discussion: """
            Everything runs in this process; `make bench` runs it under `taskset -c 0` to pin it to one CPU. Each figure is operations per second of the fastest of 15 timed \
            rounds after a warm-up, alternating with rounds of the raw loop; its ratio is the median of \
            the per-round ratios to the raw round just before it: sender figures to raw crypto_box_seal, \
            receiver figures to raw crypto_box_seal_open, all with the 256-byte padded bucket.

              raw_seal, raw_open                   libsodium loops, preallocated buffers
              sender_seal_{unsigned,signed}        NotificationSender.seal: envelope, padding, JSON, size check
              sender_batch_{unsigned,signed}       JSONLSealer on JSONL lines (as seal --batch), one thread
              receiver_open_{warm,cold}_N_retired  payload JSON, key lookup, open, unpad, body JSON, checks;
                                                   warm: one opened store and CachedDeviceKeyring (a warm
                                                   extension); cold: a new KeychainStore + DeviceKeyring
                                                   per message (a fresh extension process)
              receiver_open_warm_uncached_N_retired  warm store, DeviceKeyring reading the key files each time
              receiver_extension_warm_1_retired    SecretMessageExtension.didReceive on the request iOS hands
                                                   over (payload already parsed): open, checks, content built
              receiver_open_warm_signed_N_retired  the same for signed messages (Ed25519 verify)
              receiver_open_warm_oldest_key_N_retired  a message sealed to the first, long-retired key
              receiver_open_keys_in_memory         the same open with the key pair held in memory (no keychain)
              receiver_key_lookup_only_warm        DeviceKeyring.lookUpKey alone (the keychain's share)
              receiver_replay_record_full          ReplayCache.recordIfNew of a new id, the table holding its
                                                   10 000-entry capacity (the replay cache's share of a push)

            Memory: the peak resident size of a `sealedpush device push` child, and the resident size of \
            this process after 1 000 and 10 000 notifications handled by the extension.

            With --json: {"results": [{"name", "ops_per_second", "ratio_to_raw"}], "targets": [...], \
            "memory": {...}, "environment": {...}}. `make bench` prints this next to the PyNaCl figures.
            """)

    @Flag(name: .long, help: "Print JSON instead of a table.")
    var json = false

    @Flag(name: .long, help: "Tiny iteration counts and key counts: checks that everything runs, figures are meaningless.")
    var quick = false

    @Option(name: .customLong("profile"), help: ArgumentHelp(
        "Run only the named workload for --iterations operations, untimed (for valgrind --tool=callgrind).", visibility: .hidden))
    var profile: String?

    @Option(name: .customLong("iterations"), help: ArgumentHelp("Operations for --profile.", visibility: .hidden))
    var iterations = 1000

    func run() async throws {
        if let profile {
            try BenchRun(quick: true, progress: false).profile(profile, iterations: iterations)
            return
        }
        let report = try BenchRun(quick: quick, progress: true).run()
        if json {
            print(String(decoding: JSON.serialize(.object(report.jsonObject)), as: UTF8.self))
        } else {
            print(report.text)
        }
    }
}

/// One line of the results table.
struct BenchResult: Sendable {
    enum Floor: String, Sendable { case seal, open }
    let name: String
    let opsPerSecond: Double
    let ratio: Double
    let floor: Floor
}

/// A performance target and whether this run met it.
struct BenchTarget: Sendable {
    let name: String
    let met: Bool
    let detail: String
}

/// Everything one run measured.
struct BenchReport: Sendable {
    var results: [BenchResult] = []
    var targets: [BenchTarget] = []
    var memory = JSONObject()
    var environment = JSONObject()
    var notes: [String] = []

    static func rounded(_ x: Double, _ places: Int) -> Double {
        let f = pow(10, Double(places))
        return (x * f).rounded() / f
    }

    var jsonObject: JSONObject {
        let results: [JSONValue] = self.results.map {
            .object(JSONObject([("name", .string($0.name)), ("ops_per_second", .double(Self.rounded($0.opsPerSecond, 1))),
                                ("ratio_to_raw", .double(Self.rounded($0.ratio, 3))), ("floor", .string("raw_" + $0.floor.rawValue))]))
        }
        let targets: [JSONValue] = self.targets.map {
            .object(JSONObject([("name", .string($0.name)), ("met", .bool($0.met)), ("detail", .string($0.detail))]))
        }
        return JSONObject([("results", .array(results)), ("targets", .array(targets)), ("memory", .object(memory)),
                           ("environment", .object(environment)), ("notes", .array(notes.map { .string($0) }))])
    }

    var text: String {
        var lines: [String] = []
        for (key, value) in environment { lines.append("\(key): \(Self.plain(value))") }
        lines.append("")
        let width = max(40, (results.map(\.name.count).max() ?? 0) + 2)
        lines.append("name".padding(toLength: width, withPad: " ", startingAt: 0) + "ops/s".leftPadded(12) + "ratio".leftPadded(9) + "  vs")
        for r in results {
            lines.append(r.name.padding(toLength: width, withPad: " ", startingAt: 0)
                         + String(format: "%.0f", r.opsPerSecond).leftPadded(12)
                         + String(format: "%.3f", r.ratio).leftPadded(9) + "  raw_" + r.floor.rawValue)
        }
        lines.append("")
        lines.append("memory:")
        for (key, value) in memory { lines.append("  \(key): \(Self.plain(value))") }
        lines.append("")
        lines.append("targets:")
        for t in targets { lines.append("  [\(t.met ? "met" : "NOT met")] \(t.name): \(t.detail)") }
        if !notes.isEmpty {
            lines.append("")
            for n in notes { lines.append("note: \(n)") }
        }
        return lines.joined(separator: "\n")
    }

    static func plain(_ v: JSONValue) -> String {
        switch v {
        case let .string(s): return s
        case let .int(i): return String(i)
        case let .double(d): return String(d)
        case let .bool(b): return String(b)
        case .null: return "null"
        default: return String(decoding: JSON.serialize(v), as: UTF8.self)
        }
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}

/// The benchmark itself: synchronous, on the calling (pinned) thread.
struct BenchRun {
    let quick: Bool
    let progress: Bool

    var plan: BenchHarness.Plan { quick ? .quick : .full }
    /// Retired-key counts the receiver is measured at.
    var retiredCounts: [Int] { quick ? [1, 2, 3] : [1, 10, 1000] }
    /// Notifications after which the resident size is read, then the total.
    var memoryCheckpoints: (first: Int, total: Int) { quick ? (20, 200) : (1000, 10_000) }

    /// The extension budget the issue sets for one text delivery: 12 MiB (older iPhones killed
    /// extensions at 12–16 MB; iOS's own limit is about 24 MB).
    static let pushMemoryLimit = 12 * 1024 * 1024
    /// Allowed resident growth between the two checkpoints.
    static let growthLimit = 1024 * 1024

    func say(_ text: String) {
        if progress { printError("bench: " + text) }
    }

    func run() throws -> BenchReport {
        var report = BenchReport()
        report.environment = environment()
        let started = ContinuousClock.now

        // The floor: measured on its own first, then again next to every figure (alternating rounds);
        // each ratio is to the floor rounds run beside it, and the raw rows show the fastest floor seen.
        say("raw libsodium loops")
        var failures = 0
        let sealFloor: (Int) -> Void = { failures += RawSodiumLoops.sealLoop(iterations: $0).failures }
        let openFloor: (Int) -> Void = { failures += RawSodiumLoops.openLoop(iterations: $0).failures }
        var rawSeal = BenchHarness.measure(plan, sealFloor).opsPerSecond
        var rawOpen = BenchHarness.measure(plan, openFloor).opsPerSecond
        var figures: [BenchResult] = []
        func add(_ name: String, _ floor: BenchResult.Floor, _ body: (Int) throws -> Void) throws {
            let m = try BenchHarness.measurePaired(plan, floor: floor == .seal ? sealFloor : openFloor, work: body)
            if floor == .seal { rawSeal = max(rawSeal, m.floor) } else { rawOpen = max(rawOpen, m.floor) }
            figures.append(BenchResult(name: name, opsPerSecond: m.work, ratio: m.ratio, floor: floor))
        }

        // The sender.
        say("sender")
        let device = BoxKeyPair.generate()
        let signer = SigningKeyPair.generate()
        let senderBench = try SenderBench(record: DeviceKeyRecord(publicKey: device.publicKey, createdAt: Date()), signer: signer)
        let padded = try senderBench.paddedLengths()
        if padded.unsigned != 256 || padded.signed != 256 {
            report.notes.append("the benchmark message padded to \(padded.unsigned) (unsigned) and \(padded.signed) (signed) bytes, not 256")
        }
        try add("sender_seal_unsigned", .seal) { try senderBench.seal(senderBench.unsigned, $0) }
        try add("sender_seal_signed", .seal) { try senderBench.seal(senderBench.signed, $0) }
        try add("sender_batch_unsigned", .seal) { try senderBench.batch(senderBench.unsigned, $0) }
        try add("sender_batch_signed", .seal) { try senderBench.batch(senderBench.signed, $0) }

        // The receiver, with a growing number of retired keys in one store.
        let base = try BenchHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: base) }
        let receiver = try ReceiverBench(root: base.appendingPathComponent("device"), signer: signer)
        var setupSeconds = 0.0
        for count in retiredCounts {
            say("receiver with \(count) retired key(s)")
            let setupStart = ContinuousClock.now
            try receiver.retire(until: count)
            setupSeconds += BenchHarness.seconds(ContinuousClock.now - setupStart)
            try add("receiver_open_warm_\(count)_retired", .open) { try receiver.openWarm(receiver.unsignedPayloads, $0) }
            try add("receiver_open_cold_\(count)_retired", .open) { try receiver.openCold(receiver.unsignedPayloads, $0) }
            try add("receiver_open_warm_signed_\(count)_retired", .open) { try receiver.openWarm(receiver.signedPayloads, $0) }
            if count == retiredCounts.first || count == retiredCounts.last {
                try add("receiver_open_warm_uncached_\(count)_retired", .open) { try receiver.openWarmUncached(receiver.unsignedPayloads, $0) }
            }
            if count == retiredCounts.first {
                let requests = try receiver.requests(receiver.unsignedPayloads)
                let keys = try receiver.cachedKeys()
                try add("receiver_extension_warm_\(count)_retired", .open) { try receiver.extensionWarm(requests, keys: keys, $0) }
                try add("receiver_open_keys_in_memory", .open) { try receiver.openWithKeysInMemory(receiver.unsignedPayloads, $0) }
                try add("receiver_key_lookup_only_warm", .open) { try receiver.lookUpOnly($0) }
            }
            if count == retiredCounts.last {
                try add("receiver_open_warm_oldest_key_\(count)_retired", .open) { try receiver.openWarm(receiver.oldestKeyPayloads, $0) }
            }
        }
        // The replay cache's share of a push: recording a new id in a table already holding its capacity.
        say("replay cache: recording ids in a full table")
        let replay = try ReplayBench(directory: base.appendingPathComponent("replay-bench"))
        try add("receiver_replay_record_full", .open) { try replay.record($0) }
        guard failures == 0 else { throw BenchFailure("\(failures) raw libsodium calls failed") }
        report.results = [BenchResult(name: "raw_seal", opsPerSecond: rawSeal, ratio: 1, floor: .seal),
                          BenchResult(name: "raw_open", opsPerSecond: rawOpen, ratio: 1, floor: .open)] + figures
        report.environment["retired_key_setup_seconds"] = .double(BenchReport.rounded(setupSeconds, 2))

        // Memory.
        say("memory: notifications in one process")
        let (first, total) = memoryCheckpoints
        let keys = try receiver.cachedKeys()
        let signedRequests = try receiver.requests(receiver.signedPayloads)
        let rssStart = BenchHarness.procStatus("VmRSS")
        try receiver.extensionWarm(signedRequests, keys: keys, first)
        let rssFirst = BenchHarness.procStatus("VmRSS")
        try receiver.extensionWarm(signedRequests, keys: keys, total - first)
        let rssTotal = BenchHarness.procStatus("VmRSS")
        say("memory: device push child")
        let payloadFile = base.appendingPathComponent("payload.json")
        try Data(receiver.unsignedPayloads[0]).write(to: payloadFile)
        let exe = BenchHarness.sealedpushExecutable
        let push = try BenchHarness.peakMemory(of: exe, ["device", "push", "--keychain", receiver.root.path, "--json", payloadFile.path])
        let baseline = try BenchHarness.peakMemory(of: exe, ["--version"])
        // Closest to what iOS counts (its footprint is dirty and compressed memory, not code pages):
        // the anonymous memory of a delivery held up by --extension-delay — an indication, not a peak.
        // (smaps' Private_Dirty would also count the binary's own pages while a fresh build of it
        // is still unwritten in the page cache.)
        let midway = try BenchHarness.privateMemoryDuringStall(of: exe, ["device", "push", "--keychain", receiver.root.path, "--json",
                                                                         "--extension-delay", "600ms", payloadFile.path])
        let pushDecrypted = push.stdout.contains(#""outcome":"decrypted""#)

        func mb(_ bytes: Int?) -> JSONValue { bytes.map { .double(BenchReport.rounded(Double($0) / 1_048_576, 2)) } ?? .null }
        report.memory = JSONObject([
            ("device_push_peak_rss_mib", mb(push.peakBytes)),
            ("device_push_outcome", .string(pushDecrypted ? "decrypted" : "not decrypted (status \(push.status)): \(push.stdout.prefix(200))")),
            ("version_only_peak_rss_mib", mb(baseline.peakBytes)),
            ("device_push_anonymous_kib_midway", midway.anonymous.map { .int(Int64($0 / 1024)) } ?? .null),
            ("peak_rss_method", .string(push.method)),
            ("notifications_first_checkpoint", .int(Int64(first))),
            ("notifications_total", .int(Int64(total))),
            ("rss_before_mib", mb(rssStart)),
            ("rss_after_first_mib", mb(rssFirst)),
            ("rss_after_total_mib", mb(rssTotal)),
            ("rss_growth_kib", (rssFirst != nil && rssTotal != nil) ? .int(Int64((rssTotal! - rssFirst!) / 1024)) : .null),
            ("bench_process_peak_rss_mib", mb(BenchHarness.procStatus("VmHWM"))),
        ])

        report.targets = targets(report, push: push, pushDecrypted: pushDecrypted, rssFirst: rssFirst, rssTotal: rssTotal)
        if quick { report.notes.append("--quick: tiny iteration and key counts; the figures and targets are not meaningful") }
        report.environment["bench_seconds"] = .double(BenchReport.rounded(BenchHarness.seconds(ContinuousClock.now - started), 1))
        return report
    }

    /// Runs one workload `iterations` times with no timing, for instruction-level profiling.
    func profile(_ name: String, iterations: Int) throws {
        let signer = SigningKeyPair.generate()
        let device = BoxKeyPair.generate()
        let senderBench = try SenderBench(record: DeviceKeyRecord(publicKey: device.publicKey, createdAt: Date()), signer: signer)
        switch name {
        case "raw_seal": _ = RawSodiumLoops.sealLoop(iterations: iterations)
        case "raw_open": _ = RawSodiumLoops.openLoop(iterations: iterations)
        case "sender_seal_unsigned": try senderBench.seal(senderBench.unsigned, iterations)
        case "sender_seal_signed": try senderBench.seal(senderBench.signed, iterations)
        case "sender_batch_unsigned": try senderBench.batch(senderBench.unsigned, iterations)
        case "sender_batch_signed": try senderBench.batch(senderBench.signed, iterations)
        case "receiver_open_warm", "receiver_open_warm_uncached", "receiver_extension_warm", "receiver_open_cold", "receiver_open_warm_signed",
             "notifications",
             "receiver_key_lookup",
             "receiver_open_keys_in_memory":
            let base = try BenchHarness.temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: base) }
            let receiver = try ReceiverBench(root: base.appendingPathComponent("device"), signer: signer)
            try receiver.retire(until: 1)
            switch name {
            case "receiver_open_warm": try receiver.openWarm(receiver.unsignedPayloads, iterations)
            case "receiver_open_warm_uncached": try receiver.openWarmUncached(receiver.unsignedPayloads, iterations)
            case "receiver_extension_warm":
                try receiver.extensionWarm(receiver.requests(receiver.unsignedPayloads), keys: receiver.cachedKeys(), iterations)
            case "receiver_open_cold": try receiver.openCold(receiver.unsignedPayloads, iterations)
            case "receiver_open_warm_signed": try receiver.openWarm(receiver.signedPayloads, iterations)
            case "receiver_key_lookup": try receiver.lookUpOnly(iterations)
            case "receiver_open_keys_in_memory": try receiver.openWithKeysInMemory(receiver.unsignedPayloads, iterations)
            default:
                try receiver.extensionWarm(receiver.requests(receiver.signedPayloads), keys: receiver.cachedKeys(), iterations)
            }
        default:
            throw BenchFailure("unknown workload \(name); one of raw_seal, raw_open, sender_seal_unsigned, sender_seal_signed, "
                + "sender_batch_unsigned, sender_batch_signed, receiver_open_warm, receiver_open_cold, receiver_open_warm_signed, notifications")
        }
    }

    func targets(_ report: BenchReport, push: BenchHarness.ChildRun, pushDecrypted: Bool, rssFirst: Int?, rssTotal: Int?) -> [BenchTarget] {
        func ratio(_ name: String) -> Double? { report.results.first { $0.name == name }?.ratio }
        func f(_ x: Double?) -> String { x.map { String(format: "%.3f×", $0) } ?? "n/a" }
        var out: [BenchTarget] = []
        for name in ["sender_seal_unsigned", "sender_batch_unsigned"] {
            let r = ratio(name)
            out.append(BenchTarget(name: "\(name) >= 1.0x raw_seal", met: (r ?? 0) >= 1.0, detail: f(r)))
        }
        let lo = retiredCounts.first!, hi = retiredCounts.last!
        let warm = ratio("receiver_open_warm_\(lo)_retired")
        out.append(BenchTarget(name: "receiver_open_warm_\(lo)_retired >= 0.9x raw_open", met: (warm ?? 0) >= 0.9, detail: f(warm)))
        for kind in ["warm", "cold", "warm_signed"] {
            let a = ratio("receiver_open_\(kind)_\(lo)_retired"), b = ratio("receiver_open_\(kind)_\(hi)_retired")
            let change = (a != nil && b != nil) ? b! / a! : nil
            out.append(BenchTarget(
                name: "receiver_open_\(kind) flat from \(lo) to \(hi) retired keys (within 10%)",
                met: change.map { abs($0 - 1) <= 0.10 } ?? false,
                detail: "\(f(a)) -> \(f(b))" + (change.map { String(format: " (%+.1f%%)", ($0 - 1) * 100) } ?? "")))
        }
        let oldest = ratio("receiver_open_warm_oldest_key_\(hi)_retired")
        out.append(BenchTarget(
            name: "opening with the oldest of \(hi) retired keys costs the same as with the active key (within 10%)",
            met: (oldest != nil && warm != nil) ? abs(oldest! / ratio("receiver_open_warm_\(hi)_retired")! - 1) <= 0.10 : false,
            detail: "\(f(oldest)) vs \(f(ratio("receiver_open_warm_\(hi)_retired")))"))
        let peak = push.peakBytes
        out.append(BenchTarget(
            name: "device push peak RSS <= 12 MiB",
            met: pushDecrypted && (peak ?? .max) <= Self.pushMemoryLimit,
            detail: (peak.map { String(format: "%.2f MiB", Double($0) / 1_048_576) } ?? "unmeasured")
                + (pushDecrypted ? "" : " (the payload was not decrypted)") + " via " + push.method))
        let growth = (rssFirst != nil && rssTotal != nil) ? rssTotal! - rssFirst! : nil
        let (first, total) = memoryCheckpoints
        out.append(BenchTarget(
            name: "no RSS growth from \(first) to \(total) notifications (<= 1 MiB)",
            met: (growth ?? .max) <= Self.growthLimit,
            detail: growth.map { "\($0 / 1024) KiB" } ?? "unmeasured (no /proc/self/status)"))
        return out
    }

    func environment() -> JSONObject {
        var cpuModel = "unknown"
        if let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
           let line = info.split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
           let colon = line.firstIndex(of: ":") {
            cpuModel = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return JSONObject([
            ("date", .string(Timestamp.format(Date()))),
            ("cpu", .string(cpuModel)),
            ("online_cpus", .int(Int64(ProcessInfo.processInfo.activeProcessorCount))),
            ("allowed_cpus", .int(Int64(ProcessInfo.processInfo.activeProcessorCount))),
            ("libsodium", .string(CryptoLibrary.version)),
            ("message_padded_bytes", .int(256)),
            ("mode", .string(quick ? "quick" : "full")),
        ])
    }
}

/// Writes text to standard error.
func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
