import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import NIOConcurrencyHelpers
package import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushSender
import SealedPushWire

/// The APNs token key: `--auth-key`, `--key-id`, `--team-id` (shared by `send` and `apns serve`).
package struct APNsKeyOptions: ParsableArguments {
    @Option(name: .customLong("auth-key"), help: ArgumentHelp("The APNs token key (AuthKey_KEYID.p8 from Apple's developer site; mode 0600).", valueName: "FILE"))
    var authKey: String

    @Option(name: .customLong("key-id"), help: ArgumentHelp("The key's 10-character id (default: read from the AuthKey_KEYID.p8 file name).", valueName: "KEY_ID"))
    var keyID: String?

    @Option(name: .customLong("team-id"), help: ArgumentHelp("The 10-character Apple Developer team id the key belongs to.", valueName: "TEAM_ID"))
    var teamID: String

    /// The key id: `--key-id`, else the `KEYID` of an `AuthKey_KEYID.p8` file name.
    var resolvedKeyID: String? {
        if let keyID { return keyID }
        let name = authKey.split(separator: "/").last.map(String.init) ?? authKey
        guard name.hasPrefix("AuthKey_"), name.hasSuffix(".p8") else { return nil }
        return String(name.dropFirst("AuthKey_".count).dropLast(".p8".count))
    }

    package init() {}

    package func validate() throws {
        guard resolvedKeyID != nil else {
            throw ValidationError("--key-id is needed: the auth key's file name is not AuthKey_KEYID.p8.")
        }
    }

    /// The signing key from the `.p8` file.
    package func signingKey() throws -> APNsSigningKey {
        try APNsSigningKey(p8File: authKey, keyID: resolvedKeyID ?? "", teamID: teamID)
    }
}

/// Which APNs `send` talks to and how it trusts it, and the topic.
struct APNsAuthOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The apns-topic: the app's bundle id.", valueName: "TOPIC"))
    var topic: String

    @Option(name: .long, help: ArgumentHelp("production, sandbox, or a base URL (https://127.0.0.1:2197 for `sealedpush-server apns serve`).", valueName: "ENV"))
    var environment = APNsEnvironmentArgument(argument: "production")!

    @Option(name: .customLong("ca-cert"), help: ArgumentHelp("Also trust this CA certificate (PEM), e.g. the ca.pem `sealedpush-server apns serve` writes.", valueName: "FILE"))
    var caCert: String?


    func validate() throws {
        if let problem = APNsHeaderRules.topicProblem(topic) {
            throw ValidationError("--topic must be the app's bundle id (e.g. com.example.app); it \(problem).")
        }
        if caCert != nil {
            switch environment.environment {
            case .production, .sandbox:
                throw ValidationError("--ca-cert is for a local or private APNs (--environment https://HOST:PORT); Apple's \(environment.environment == .production ? "production" : "sandbox") servers are verified against the system's roots only.")
            case .custom: break
            }
        }
    }

    /// Reads `--ca-cert`.
    func trustedCertificates() throws -> [[UInt8]] {
        guard let caCert else { return [] }
        return [try readInput(caCert, limit: 1 << 20, what: "the CA certificate (--ca-cert)")]
    }

}

/// `sealedpush send`: seal and deliver through APNs.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Seal a secret message and deliver it through APNs (HTTP/2, token authentication).",
        discussion: """
            Single push: --to DEVICE_KEY.json --device-token HEX with the message options of `seal`. \
            Batch: --batch IN.jsonl, the JSONL input of `seal --batch` with a "device_token" member per \
            line; lines are read, sealed and sent as they stream (memory stays flat), up to \
            --concurrency pushes in flight over one HTTP/2 connection.

            Prints one JSON result per push on stdout, as pushes complete:

              {"line": N, "apns_id": "...", "status": 200, "reason": null,
               "timestamp": null, "unregistered": false}

            A refusal gives APNs's status and reason ("BadDeviceToken"...); 410 gives "timestamp" \
            (milliseconds). "unregistered": true means stop sending to this device token (Unregistered, \
            ExpiredToken, BadDeviceToken, DeviceTokenNotForTopic). A line that could not be sealed or \
            sent has "status": null and an "error". 429 TooManyRequests, 500, 503, timeouts and \
            connection failures are retried (--retries) with exponential backoff and jitter; nothing \
            else is. On a terminal, stderr shows progress (rate, ETA) and a summary at the end. Exit \
            status 1 when any push failed.

            --reveal sends a reveal message, as `seal --reveal` does (batch lines: "reveal": true).

            Messages expire after 7 days unless --expires-in says otherwise (APNs stores the push that \
            long for an offline device); --deliver-once sends apns-expiration 0.

            Examples:
              sealedpush send --to device-key.json --device-token $TOKEN --body "Meet at 6" \\
                  --auth-key AuthKey_ABC123DEFG.p8 --team-id DEF123GHIJ --topic com.example.app
              sealedpush send --batch messages.jsonl --auth-key AuthKey_ABC123DEFG.p8 \\
                  --team-id DEF123GHIJ --topic com.example.app --environment https://127.0.0.1:2197 \\
                  --ca-cert apns-ca.pem
            """)

    @Option(name: .long, help: ArgumentHelp("The device key record to seal to (JSON file, or - for stdin).", valueName: "DEVICE_KEY.json"))
    var to: String?

    @Option(name: .customLong("device-token"), help: ArgumentHelp("The device's APNs token (64 hex digits).", valueName: "HEX"))
    var deviceToken: String?

    @Option(name: .long, help: ArgumentHelp("Send one push per line of this JSONL file (- for stdin); each line has \"device_token\".", valueName: "IN.jsonl"))
    var batch: String?

    @OptionGroup(title: "APNs") var key: APNsKeyOptions
    @OptionGroup(title: "APNs") var apns: APNsAuthOptions
    @OptionGroup(title: "Message") var sealing: SealingOptions
    @OptionGroup var logging: LoggingOptions

    @Option(name: .customLong("allow-topic"), help: ArgumentHelp("With --batch: a topic a line's \"topic\" may name besides --topic (repeatable); a line naming any other is refused.", valueName: "TOPIC"))
    var allowTopics: [String] = []

    @Option(name: .long, help: ArgumentHelp("The most pushes in flight at once.", valueName: "N"))
    var concurrency = 100

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The deadline for one try of one push (500ms, 10s…).", valueName: "DURATION"))
    var timeout = DurationArgument(milliseconds: 10_000)

    @Option(name: .long, help: ArgumentHelp("Retries after the first try, for 429/500/503/timeouts/connection failures.", valueName: "N"))
    var retries = 3

    func validate() throws {
        if let batch {
            guard !batch.isEmpty else { throw ValidationError("--batch needs a file path, or - for stdin.") }
            guard to == nil, deviceToken == nil else {
                throw ValidationError("--to and --device-token cannot be used with --batch: each line names its device in \"to\" and \"device_token\".")
            }
            if let option = sealing.perMessageOption {
                throw ValidationError("\(option) cannot be used with --batch: give it per line in the JSONL input.")
            }
        } else {
            guard let to, !to.isEmpty else { throw ValidationError("Missing --to DEVICE_KEY.json (or use --batch IN.jsonl).") }
            guard let deviceToken else { throw ValidationError("Missing --device-token HEX: the device's APNs token.") }
            guard APNsPush.isValidDeviceToken(deviceToken) else {
                throw ValidationError("--device-token must be 64 hexadecimal digits (the token the app got from APNs); it has \(deviceToken.count) characters.")
            }
            try sealing.validateText()
        }
        for topic in allowTopics {
            if let problem = APNsHeaderRules.topicProblem(topic) { throw ValidationError("--allow-topic must be a bundle id; one \(problem).") }
        }
        if !allowTopics.isEmpty && batch == nil { throw ValidationError("--allow-topic applies to --batch lines' \"topic\"; a single push uses --topic.") }
        guard (1...10_000).contains(concurrency) else { throw ValidationError("--concurrency must be 1 to 10000; it was \(concurrency).") }
        guard (0...20).contains(retries) else { throw ValidationError("--retries must be 0 to 20; it was \(retries).") }
    }

    func run() async throws {
        logging.apply(default: .warning)
        let sender = try sealing.sender()
        let mediaStore = try sealing.mediaStore()
        let logger = Logger(label: "sealedpush.send")
        let configuration = APNsClientConfiguration(
            environment: apns.environment.environment, signingKey: try key.signingKey(), topic: apns.topic,
            trustedCertificatesPEM: try apns.trustedCertificates(), timeout: timeout.duration, maxInFlight: concurrency,
            retry: .init(maxTries: retries + 1))
        let client: APNsClient
        client = try APNsClient(configuration: configuration, logger: logger)
        let summary: SendSummary
        do {
            if let batch {
                summary = try await SendBatch(client: client, sealer: JSONLSealer(sender: sender, mediaStore: mediaStore, mediaSource: try sealing.mediaSourceDirectory()),
                                              concurrency: concurrency, allowedTopics: Set(allowTopics)).run(path: batch)
            } else {
                summary = try await sendOne(client: client, sender: sender, mediaStore: mediaStore)
            }
        } catch {
            await client.shutdown()
            throw error
        }
        await client.shutdown()
        if summary.total > 1 || summary.failed > 0 || StandardIO.errorIsTerminal { StandardIO.writeError(summary.text + "\n") }
        if summary.failed > 0 { throw ExitCode(1) }
    }

    func sendOne(client: APNsClient, sender: NotificationSender, mediaStore: DirectoryMediaStore?) async throws -> SendSummary {
        guard let to, let deviceToken else { throw ValidationError("Missing --to and --device-token.") }
        let record = try readDeviceRecord(to)
        let message = try sealing.message(topic: nil, mediaStore: mediaStore)
        let sealed: SealedNotification
        sealed = try sender.seal(message, to: record)
        if let receiptsDB = sealing.receiptsDB { try await ReceiptsRecording.record(sealed, database: receiptsDB) }
        let result = await SendResult.deliver(APNsPush(sealed, deviceToken: deviceToken, topic: apns.topic), line: 1, client: client)
        var summary = SendSummary()
        summary.add(result)
        StandardIO.writeOutput(result.jsonLine)
        if result.untrustedServer, let error = result.error { throw CLIError(error) }
        return summary
    }
}

/// The result of one push, as `send` prints it.
struct SendResult: Sendable {
    let line: Int
    let apnsID: String?
    let status: Int?
    let reason: APNsReason?
    let timestamp: Int64?
    /// Why the push was not sent (a line that could not be sealed, a timeout, a connection failure).
    let error: String?
    /// An untrusted server certificate: it stops a whole run, since every push would fail the same way.
    var untrustedServer = false

    var failed: Bool { status != 200 }
    var unregistered: Bool { reason?.stopSendingToToken ?? false }

    static func deliver(_ push: APNsPush, line: Int, client: APNsClient) async -> SendResult {
        do {
            let accepted = try await client.send(push)
            return SendResult(line: line, apnsID: accepted.apnsID, status: 200, reason: nil, timestamp: nil, error: nil)
        } catch let .rejected(rejection) {
            return SendResult(line: line, apnsID: rejection.apnsID ?? push.apnsID, status: rejection.status, reason: rejection.reason,
                              timestamp: rejection.timestamp, error: nil)
        } catch {
            var result = SendResult(line: line, apnsID: push.apnsID, status: nil, reason: nil, timestamp: nil,
                                    error: CLIErrors.message(error))
            if case .untrustedServer = error { result.untrustedServer = true }
            return result
        }
    }

    static func failure(line: Int, _ message: String) -> SendResult {
        SendResult(line: line, apnsID: nil, status: nil, reason: nil, timestamp: nil, error: message)
    }

    /// `{"line":N,"apns_id":…,"status":…,"reason":…,"timestamp":…,"unregistered":…}` (and `"error"` when not sent), with a newline.
    var jsonLine: [UInt8] {
        var members: [(String, JSONValue)] = [
            ("line", .int(Int64(line))), ("apns_id", apnsID.map { .string($0) } ?? .null),
            ("status", status.map { .int(Int64($0)) } ?? .null), ("reason", reason.map { .string($0.rawValue) } ?? .null),
            ("timestamp", timestamp.map { .int($0) } ?? .null), ("unregistered", .bool(unregistered)),
        ]
        if let error { members.append(("error", .string(error))) }
        return JSON.serialize(.object(JSONObject(members))) + [0x0a]
    }
}

/// Counts for the end-of-run summary.
struct SendSummary {
    var total = 0
    var failed = 0
    var unregistered = 0
    var reasons: [String: Int] = [:]

    mutating func add(_ result: SendResult) {
        total += 1
        guard result.failed else { return }
        failed += 1
        if result.unregistered { unregistered += 1 }
        reasons[result.reason?.rawValue ?? "not sent", default: 0] += 1
    }

    var text: String {
        var s = "sent \(total - failed) of \(total) push\(total == 1 ? "" : "es")"
        if failed > 0 {
            let detail = reasons.sorted { $0.value > $1.value }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            s += "; \(failed) failed (\(detail))"
        }
        if unregistered > 0 { s += "; stop sending to \(unregistered) device token\(unregistered == 1 ? "" : "s") (\"unregistered\": true)" }
        return s
    }
}

/// Streams a JSONL batch with `concurrency` workers, each of which takes the next line, seals it and sends it
/// (so lines are sealed on every core while others wait for APNs), at most `concurrency` pushes in flight;
/// results are written as they complete, in one `write` per 64 KiB of them (per line on a terminal) rather
/// than one per push.
struct SendBatch {
    let client: APNsClient
    let sealer: JSONLSealer
    let concurrency: Int
    /// Topics a line may name besides the client's (`--allow-topic`).
    var allowedTopics: Set<String> = []
    static let maxLineBytes = 1 << 20

    func run(path: String) async throws -> SendSummary {
        let input = try InputFile.openBatch(path)
        let expected = path != "-" && StandardIO.errorIsTerminal ? try SendBatch.countLines(path) : nil
        defer { input.close() }
        let lines = NIOLockedValueBox(LineReader(input: input, maxLineBytes: SendBatch.maxLineBytes))
        let results = SendResults(progress: Progress(expected: expected), lineBuffered: StandardIO.outputIsTerminal)
        let client = self.client, sealer = self.sealer, allowedTopics = self.allowedTopics
        let topic = client.configuration.topic
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<concurrency {
                    group.addTask {
                        while let (number, line) = try lines.withLockedValue({ try $0.next() }) {
                            guard let line else {
                                try results.add(.failure(line: number, "the line is over \(SendBatch.maxLineBytes) bytes"))
                                continue
                            }
                            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0d }) { continue }
                            let push: APNsPush
                            do throws(SenderError) { push = try sealer.sealPush(line: line.span, topic: topic, allowedTopics: allowedTopics) } catch {
                                try results.add(.failure(line: number, error.description))
                                continue
                            }
                            try results.add(await SendResult.deliver(push, line: number, client: client))
                        }
                    }
                }
                try await group.waitForAll()
            }
        } catch {
            results.flush()
            throw error
        }
        return results.finish()
    }

    static func countLines(_ path: String) throws -> Int {
        let input = try InputFile.open(path, what: "the batch file")
        defer { input.close() }
        var count = 0, last: UInt8 = 0x0a
        while true {
            let chunk = try input.read(upToCount: 1 << 20)
            if chunk.isEmpty { break }
            for byte in chunk where byte == 0x0a { count += 1 }
            last = chunk.last ?? last
        }
        return count + (last == 0x0a ? 0 : 1)
    }
}

/// The results of a batch as its workers finish them: the summary, the progress line, and the output, written
/// in chunks (each whole lines) or line by line on a terminal.
final class SendResults: Sendable {
    struct State {
        var summary = SendSummary()
        var progress: Progress
        var output: [UInt8] = []
    }

    let state: NIOLockedValueBox<State>
    let lineBuffered: Bool
    static let chunk = 64 * 1024

    init(progress: Progress, lineBuffered: Bool) {
        state = NIOLockedValueBox(State(progress: progress))
        self.lineBuffered = lineBuffered
    }

    /// Counts `result` and queues its output line; throws (ending the run) when its server was untrusted.
    func add(_ result: SendResult) throws {
        let line = result.jsonLine
        state.withLockedValue { s in
            s.summary.add(result)
            s.output += line
            s.progress.tick()
            if lineBuffered || s.output.count >= Self.chunk {
                StandardIO.writeOutput(s.output)
                s.output.removeAll(keepingCapacity: true)
            }
        }
        if result.untrustedServer, let error = result.error { throw CLIError(error) }
    }

    /// Writes what is queued.
    func flush() {
        state.withLockedValue { s in
            if !s.output.isEmpty { StandardIO.writeOutput(s.output) }
            s.output.removeAll()
        }
    }

    /// Writes what is queued, ends the progress line, and gives the summary.
    func finish() -> SendSummary {
        flush()
        return state.withLockedValue { s in
            s.progress.end()
            return s.summary
        }
    }
}

/// The lines of a `send --batch` input, one at a time, by the same rule as `seal --batch`
/// (`JSONLLineSplitter`): a line longer than the limit is returned once as `nil`.
struct LineReader {
    let input: InputFile
    var splitter: JSONLLineSplitter
    var pending: [JSONLLineSplitter.Item] = []
    var index = 0
    var atEOF = false

    init(input: InputFile, maxLineBytes: Int) {
        self.input = input
        splitter = JSONLLineSplitter(maxLineBytes: maxLineBytes)
    }

    /// The next line and its number (from 1), `(n, nil)` for an overlong line, `nil` at the end.
    mutating func next() throws -> (Int, [UInt8]?)? {
        while index >= pending.count {
            if atEOF { return nil }
            let chunk = try input.read(upToCount: 1 << 16)
            atEOF = chunk.isEmpty
            pending = splitter.feed(chunk)
            index = 0
        }
        defer { index += 1 }
        switch pending[index] {
        case let .line(number, range): return (number, Array(splitter.buffer[range]))
        case let .tooLong(number): return (number, nil)
        }
    }
}

/// A one-line progress display on a terminal's stderr: a bar (when the line count is known), count, rate, ETA.
struct Progress {
    let expected: Int?
    let enabled = StandardIO.errorIsTerminal
    let start = ContinuousClock.now
    var done = 0
    var lastDrawn = ContinuousClock.now - .seconds(1)

    init(expected: Int?) { self.expected = expected }

    mutating func tick() {
        done += 1
        guard enabled else { return }
        let now = ContinuousClock.now
        guard now - lastDrawn >= .milliseconds(200) else { return }
        lastDrawn = now
        draw(now)
    }

    func draw(_ now: ContinuousClock.Instant) {
        let elapsed = Double((now - start).components.seconds) + Double((now - start).components.attoseconds) / 1e18
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        var line = "\r"
        if let expected, expected > 0 {
            let filled = min(24, done * 24 / expected)
            line += "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: 24 - filled) + "] "
        }
        line += "\(done)"
        if let expected { line += "/\(expected)" }
        line += " pushes  \(Int(rate))/s"
        if let expected, rate > 0, expected > done { line += "  ETA \(Int(Double(expected - done) / rate) + 1)s" }
        StandardIO.writeError(line + "   ")
    }

    mutating func end() {
        guard enabled else { return }
        draw(ContinuousClock.now)
        StandardIO.writeError("\n")
    }
}
