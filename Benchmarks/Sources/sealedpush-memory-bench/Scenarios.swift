import CHeapCount
import Foundation
import Logging
import SealedPushCrypto
import SealedPushReceiver
import SealedPushSender
import SealedPushWire
import Synchronization

/// A benchmark failure: the receiver did not do what the scenario expects (a figure for broken work would be meaningless).
struct MemoryBenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What the receiver is measured doing, each in a fresh process of its own.
enum Scenario: String, CaseIterable, Sendable {
    /// One text message opened by `SecretMessageExtension`.
    case text
    /// A reveal message held by the service extension (its text stays sealed to the reveal key).
    case revealHold = "reveal_hold"
    /// The held notification opened by `RevealContentExtension` (the press and hold).
    case revealOpen = "reveal_open"
    /// A 10 MB image as 4 attachments of 2.5 MB, downloaded and decrypted in parallel.
    case media4x = "media_4x2500k"
    /// A 10 MB image attachment beside 3 small ones, in parallel.
    case media1plus3 = "media_10m_plus_3x100k"
    /// Two requests at once in one process (the image in 4 attachments and a text message), on a device whose
    /// receipt outbox and pending queue are full (`WorstCase`).
    case worstCase = "worst_case"

    var summary: String {
        switch self {
        case .text: return "one text message, SecretMessageExtension.didReceive (in-memory device key)"
        case .revealHold: return "a reveal message held by SecretMessageExtension (text stays sealed to the reveal key)"
        case .revealOpen: return "the held reveal message opened by RevealContentExtension.didReceive (press and hold)"
        case .media4x: return "SecretMessageExtension with a 10 MB image as 4 JPEG attachments of 2.5 MB, fetched in parallel"
        case .media1plus3: return "SecretMessageExtension with one 10 MB JPEG and 3 JPEGs of 100 kB, fetched in parallel"
        case .worstCase: return "two SecretMessageExtension instances at once in one process (4 x 2.5 MB attachments; a text), "
            + "the outbox and the pending queue full, each instance's maintenance before its handler"
        }
    }

    /// The budget this scenario is held to: 2 MiB for a text message (a reveal is one too), 8 MiB for a 10 MB image,
    /// 12 MiB for the worst case.
    var limitBytes: Int { self == .worstCase ? 12 * 1_048_576 : isMedia ? 8 * 1_048_576 : 2 * 1_048_576 }

    var isMedia: Bool { self == .media4x || self == .media1plus3 }

    /// File sizes of the attachments (bytes).
    func attachmentSizes(quick: Bool) -> [Int] {
        switch self {
        case .media4x: return quick ? [100_000, 100_000, 100_000, 100_000] : [2_500_000, 2_500_000, 2_500_000, 2_500_000]
        case .media1plus3: return quick ? [400_000, 20_000, 20_000, 20_000] : [10_000_000, 100_000, 100_000, 100_000]
        default: return []
        }
    }

    /// What the delivery must be for the figure to count.
    var expectedOutcome: String {
        switch self {
        case .revealHold: return "held"
        case .revealOpen: return "revealed"
        default: return "decrypted"
        }
    }
}

/// The inputs of every scenario, made once by the parent process in a private directory: the device and reveal
/// secret keys, the APNs payloads, the notification the service extension held, and the media objects. The
/// process measured only reads them, so none of the sealing code runs (nor warms anything) in it.
struct Fixtures {
    let directory: String
    var objects: String { directory + "/objects" }
    static let mediaBaseURL = "https://media.example.com/o"
    static let heldIdentifier = "bench-reveal"

    /// Makes the fixtures in `directory` (which exists, `0700`).
    static func make(in directory: String, quick: Bool, say: (String) -> Void = { _ in }) async throws -> Fixtures {
        let fixtures = Fixtures(directory: directory)
        try FileManager.default.createDirectory(atPath: fixtures.objects, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        let device = BoxKeyPair.generate()
        let reveal = BoxKeyPair.generate()
        try fixtures.write("device.key", device.secretKey.unsafeCopyToArray())
        try fixtures.write("reveal.key", reveal.secretKey.unsafeCopyToArray())
        let record = DeviceKeyRecord(publicKey: device.publicKey, createdAt: Date(), reveal: RevealKeyRecord(publicKey: reveal.publicKey))
        let sender = try NotificationSender()

        var text = SecretMessage(title: "Agent K", body: "The eagle lands at noon. Bring the documents to the usual place; "
                                 + "the courier wears a red scarf and asks for the weather in Lisbon.", threadID: "ops")
        text.expiry = .after(seconds: 86_400)
        try fixtures.write("text.json", try sender.seal(text, to: record).payload)

        var secret = text
        secret.reveal = .standard
        let revealPayload = try sender.seal(secret, to: record).payload
        try fixtures.write("reveal.json", revealPayload)
        // The notification as the service extension hands it to iOS, for the content extension's process.
        let held = SecretMessageExtension(configuration: .init(keys: MemoryKeys([device]), logger: quietLogger()))
            .open(try request(revealPayload, identifier: heldIdentifier))
        guard held.outcome == .held else { throw MemoryBenchFailure("the reveal fixture was not held: \(held.outcome)") }
        let c = held.content
        try fixtures.write("held.json", JSON.serialize(.object(JSONObject([
            ("title", .string(c.title)), ("subtitle", .string(c.subtitle)), ("body", .string(c.body)),
            ("thread", .string(c.threadIdentifier)), ("category", .string(c.categoryIdentifier)), ("user_info", .object(c.userInfo)),
        ]))))

        let store = try DirectoryMediaStore(directory: fixtures.objects, baseURL: mediaBaseURL)
        for scenario in Scenario.allCases where scenario.isMedia {
            var message = SecretMessage(title: "Agent K", body: "The photographs.", threadID: "ops")
            for (index, size) in scenario.attachmentSizes(quick: quick).enumerated() {
                try message.attach(MediaAttachment(source: .stream(size: size, label: "photo-\(index + 1).jpg", next: RandomJPEG(size: size).next),
                                                   type: "image/jpeg"), to: store)
            }
            try fixtures.write("\(scenario.rawValue).json", try sender.seal(message, to: record).payload)
        }
        try await WorstCase.make(fixtures, quick: quick, say: say)
        return fixtures
    }

    func write(_ name: String, _ bytes: [UInt8]) throws {
        let url = URL(fileURLWithPath: directory + "/" + name)
        try Data(bytes).write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
    }

    func read(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
    }

    func keyPair(_ name: String) throws -> BoxKeyPair {
        try BoxKeyPair(secretKey: SecureBytes(try read(name)))
    }

    /// The request iOS hands the extension for the payload `name` (parsed by the system, before the extension runs).
    func request(_ name: String, identifier: String) throws -> NotificationRequest {
        try Self.request(try read(name), identifier: identifier)
    }

    static func request(_ payload: [UInt8], identifier: String) throws -> NotificationRequest {
        guard case let .object(object) = try JSON.parse(payload) else { throw MemoryBenchFailure("a fixture payload is not a JSON object") }
        return NotificationRequest(identifier: identifier, payload: object)
    }

    /// The held reveal notification as iOS delivered it.
    func heldNotification() throws -> DeliveredNotification {
        guard case let .object(o) = try JSON.parse(try read("held.json")), let userInfo = o["user_info"]?.objectValue else {
            throw MemoryBenchFailure("held.json is not the held notification")
        }
        let content = NotificationContent(title: o["title"]?.stringValue ?? "", subtitle: o["subtitle"]?.stringValue ?? "",
                                          body: o["body"]?.stringValue ?? "", threadIdentifier: o["thread"]?.stringValue ?? "",
                                          categoryIdentifier: o["category"]?.stringValue ?? "", userInfo: userInfo)
        return DeliveredNotification(request: NotificationRequest(identifier: Self.heldIdentifier, content: content),
                                     deliveredAt: Int64(Date().timeIntervalSince1970))
    }
}

/// A JPEG-looking file of `size` random bytes, produced 64 KiB at a time (what `MediaAttachment.Source.stream` reads).
final class RandomJPEG: Sendable {
    let size: Int
    private let given = Mutex(0)
    init(size: Int) { self.size = size }

    @Sendable func next() throws -> [UInt8] {
        given.withLock { given -> [UInt8] in
            let n = min(65_536, size - given)
            guard n > 0 else { return [] }
            var piece = CryptoLibrary.randomBytes(count: n)
            if given == 0 {
                for (i, b) in [UInt8]([0xFF, 0xD8, 0xFF]).enumerated() where i < n { piece[i] = b }
            }
            given += n
            return piece
        }
    }
}

/// Device or reveal keys held in memory, by key id (the Keychain lookup of iOS is not part of the figure).
struct MemoryKeys: DeviceKeyProvider {
    let pairs: [KeyID: BoxKeyPair]
    init(_ pairs: [BoxKeyPair]) { self.pairs = Dictionary(uniqueKeysWithValues: pairs.map { ($0.keyID, $0) }) }
    func lookUpKey(id keyID: KeyID) -> KeyLookup { pairs[keyID].map { .found($0) } ?? .unknown }
}

/// A logger that records errors only (an extension's info lines are not part of the figure on either platform).
func quietLogger() -> Logger {
    var logger = Logger(label: "sealedpush.memory-bench")
    logger.logLevel = .error
    return logger
}

/// The figures of one measured operation.
struct Figures {
    /// The most bytes held at once by the blocks the operation allocated (malloc and guarded pages).
    var heapBytes: Int64
    /// Bytes of those blocks still allocated when the operation returned (caches, one-time runtime data).
    var retainedBytes: Int64
    /// The process's peak bytes live in malloc during the operation minus those live before it: lower than
    /// `heapBytes` when the operation frees memory allocated before it.
    var processHeapGrowthBytes: Int64
    /// Blocks the window could not record (counted, never subtracted).
    var untracked: Int64
    /// Peak anonymous resident bytes during the operation (sampled), over those before it.
    var anonymousBytes: Int64
    /// Allocation calls during the operation.
    var allocations: Int64
    /// Samples of the anonymous size taken during the operation.
    var samples: Int64
    /// The process's anonymous resident bytes at their peak during the operation (not a difference).
    var processAnonymousBytes: Int64
    /// The process's peak resident size (VmHWM) at the end of the operation: everything since it started.
    var processPeakRSSBytes: Int64
    var seconds: Double

    var json: JSONValue {
        .object(JSONObject([("heap_bytes", .int(heapBytes)), ("heap_retained_bytes", .int(retainedBytes)),
                            ("process_heap_growth_bytes", .int(processHeapGrowthBytes)), ("heap_untracked_blocks", .int(untracked)),
                            ("anonymous_bytes", .int(anonymousBytes)), ("allocations", .int(allocations)),
                            ("anonymous_samples", .int(samples)), ("process_anonymous_peak_bytes", .int(processAnonymousBytes)),
                            ("process_peak_rss_bytes", .int(processPeakRSSBytes)), ("seconds", .double((seconds * 1e4).rounded() / 1e4))]))
    }
}

/// One scenario in this (child) process: the fixtures are read and the extension's inputs prepared, then the
/// operation runs twice, each measured on its own: the first in a process that never ran it (what a fresh
/// extension process costs, one-time runtime work included), the second right after it (a warm process).
struct ScenarioRun {
    let scenario: Scenario
    let fixtures: Fixtures
    let quick: Bool

    func run() async throws -> JSONObject {
        // Whether the wrappers see the Swift runtime's allocations (a static executable), checked on a 1 MiB array.
        let before = spmem_live_bytes()
        let probe = [UInt8](repeating: 1, count: 1 << 20)
        let complete = spmem_live_bytes() - before >= 1 << 20
        withExtendedLifetime(probe) {}
        guard spmem_start_sampler(100) == 0 else { throw MemoryBenchFailure("/proc/self/statm cannot be read") }
        let settled = Self.waitForMainThreadExit(within: .seconds(2))

        let device = try fixtures.keyPair("device.key")
        let reveal = try fixtures.keyPair("reveal.key")
        let deviceKeys = MemoryKeys([device]), revealKeys = MemoryKeys([reveal])
        let fetcher = FileFetcher(directory: fixtures.objects)
        let output = fixtures.directory + "/received-\(scenario.rawValue)-\(getpid())"
        var outcome = ""
        var attached = 0
        var maintenance: [String] = []
        let operation: () async throws -> Void
        switch scenario {
        case .text, .revealHold, .media4x, .media1plus3:
            let payload = scenario == .text ? "text.json" : scenario == .revealHold ? "reveal.json" : "\(scenario.rawValue).json"
            let request = try fixtures.request(payload, identifier: "bench-\(scenario.rawValue)")
            let sizes = scenario.attachmentSizes(quick: quick)
            operation = {
                var configuration = SecretMessageExtension.Configuration(keys: deviceKeys, logger: quietLogger())
                if scenario.isMedia {
                    configuration.attachments = try AttachmentPipeline(fetcher: fetcher, directory: output)
                }
                let serviceExtension = SecretMessageExtension(configuration: configuration)
                let delivery = await withCheckedContinuation { continuation in
                    serviceExtension.didReceive(request) { continuation.resume(returning: $0) }
                }
                await serviceExtension.finishBackgroundWork()
                outcome = delivery.outcome == .decrypted ? "decrypted" : delivery.outcome == .held ? "held" : "\(delivery.outcome)"
                attached = delivery.content.attachments.count
                if scenario.isMedia {
                    let got = delivery.content.attachments.compactMap(\.size).map(Int.init)
                    guard got == sizes else {
                        throw MemoryBenchFailure("attached \(got) of \(sizes): \(delivery.attachmentFailures ?? [])")
                    }
                }
            }
        case .worstCase:
            let both = try WorstCase.operation(fixtures, fetcher: fetcher, output: output, quick: quick)
            let runs = Mutex(0)
            operation = {
                let set = WorstCase.sets[min(runs.withLock { n in defer { n += 1 }; return n }, WorstCase.sets.count - 1)]
                let done = try await both(set)
                outcome = done.outcomes.allSatisfy { $0 == "decrypted" } ? "decrypted" : done.outcomes.joined(separator: ", ")
                attached = done.attached
                maintenance.append(done.maintenance)
            }
        case .revealOpen:
            let notification = try fixtures.heldNotification()
            operation = {
                let configuration = RevealContentExtension.Configuration(
                    revealKeys: revealKeys, deviceKeys: deviceKeys, protectedDataAvailable: { true }, logger: quietLogger())
                let contentExtension = RevealContentExtension(configuration: configuration)
                let view = await contentExtension.didReceive(notification)
                await contentExtension.finishBackgroundWork()
                contentExtension.viewDidDisappear()
                outcome = view.outcome.name
            }
        }

        let rssBefore = Self.status("VmRSS") ?? 0
        let anonymousBefore = spmem_anonymous_bytes_now()
        let liveBefore = spmem_live_bytes()
        let cold = try await measure(operation)
        guard outcome == scenario.expectedOutcome else {
            throw MemoryBenchFailure("\(scenario.rawValue): the outcome was \(outcome), not \(scenario.expectedOutcome)")
        }
        let warm = try await measure(operation)
        let anonymousPeak = spmem_anonymous_peak_bytes()
        try? FileManager.default.removeItem(atPath: output)
        return JSONObject([
            ("scenario", .string(scenario.rawValue)), ("outcome", .string(outcome)), ("heap_counter_complete", .bool(complete)),
            ("main_thread_parked_before", .bool(settled)),
            ("cold", cold.json), ("warm", warm.json),
            ("attachments_attached", .int(Int64(attached))), ("attachments_in_flight_max", .int(Int64(fetcher.mostInFlight))),
            ("rss_before_bytes", .int(Int64(rssBefore))), ("anonymous_before_bytes", .int(anonymousBefore)),
            ("anonymous_peak_bytes", .int(anonymousPeak)), ("peak_rss_bytes", .int(Int64(Self.status("VmHWM") ?? 0))),
            ("guarded_bytes", .int(spmem_guarded_bytes())),
            ("maintenance", .array(maintenance.map { .string($0) })),
            // The cross-check: the counter's live bytes against glibc's own statistics, at the end.
            ("counter_live_bytes_before", .int(liveBefore)), ("counter_live_bytes", .int(spmem_live_bytes())), ("glibc_in_use_bytes", .int(spmem_glibc_in_use_bytes())),
        ])
    }

    /// Runs `operation` once in a measurement window.
    func measure(_ operation: () async throws -> Void) async throws -> Figures {
        spmem_window_begin()
        let allocations = spmem_allocations()
        let anonymous = spmem_anonymous_bytes_now()
        let live = spmem_live_bytes()
        spmem_reset_anonymous_peak()
        spmem_reset_peak()
        let start = ContinuousClock.now
        try await operation()
        let elapsed = ContinuousClock.now - start
        let retained = spmem_window_live_bytes()
        let untracked = spmem_window_untracked()
        let heap = spmem_window_end()
        let growth = spmem_peak_bytes() - live
        let anonymousPeak = spmem_anonymous_peak_bytes()
        let c = elapsed.components
        return Figures(heapBytes: heap, retainedBytes: retained, processHeapGrowthBytes: growth, untracked: untracked,
                       anonymousBytes: max(0, anonymousPeak - anonymous), allocations: spmem_allocations() - allocations,
                       samples: spmem_anonymous_samples(), processAnonymousBytes: anonymousPeak,
                       processPeakRSSBytes: Int64(Self.status("VmHWM") ?? 0), seconds: Double(c.seconds) + Double(c.attoseconds) / 1e18)
    }

    /// Waits until the process's main thread has finished leaving `main`, and says whether it did.
    ///
    /// An async `main` hands its thread to Dispatch once the work started: `dispatch_main` calls `pthread_exit`,
    /// whose unwind makes libgcc sort the frame descriptions of the whole static binary into two arrays of 544 KiB,
    /// and the thread then waits in `sigsuspend` for good. That runs beside this task; were it still running when
    /// an operation starts, the operation would be charged for it.
    static func waitForMainThreadExit(within limit: Duration) -> Bool {
        let wchan = "/proc/self/task/\(getpid())/wchan"
        let deadline = ContinuousClock.now.advanced(by: limit)
        while ContinuousClock.now < deadline {
            if let text = try? String(contentsOfFile: wchan, encoding: .utf8), text.contains("sigsuspend") { return true }
            usleep(1000)
        }
        return false
    }

    /// A `kB` field of `/proc/self/status`, in bytes.
    static func status(_ field: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(line.dropFirst(field.count + 1).filter(\.isNumber)).map { $0 * 1024 }
        }
        return nil
    }
}
