public import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SealedPushCrypto
import SealedPushKeychain
import SealedPushSender
package import SealedPushWire

/// `sealedpush seal`: seal a secret message into an APNs payload (one message, or a JSONL batch).
struct SealCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seal",
        abstract: "Seal a secret message to a device key: print the APNs payload (and optionally the headers).",
        discussion: """
            Single message: reads the device key record given with --to (the JSON a device registers, \
            wire format §6; a record whose key_id does not match its public key is refused) and prints \
            exactly the APNs payload JSON on stdout, ready to pipe into an APNs client or simulator \
            (shown here indented; the output is compact, one line):

              {"aps": {"alert": {"title": "Secret Message!",
                                 "body": "(Encrypted)"},
                       "mutable-content": 1,
                       "category": "SECRET"},
               "ENCRYPTED_DATA": "<base64 envelope>"}

            Everything of the message (title, subtitle, body, thread id, category, badge, sound) is \
            inside ENCRYPTED_DATA; only the placeholder is visible. The payload is at most 4096 bytes; \
            a message that cannot fit is refused with its size and the limit. No newline is added \
            when stdout is not a terminal, so the bytes are exactly the payload.

            With --headers the output is one JSON object with the request headers and the payload:

              {"headers": {"apns-push-type": "alert",
                           "apns-priority": "10",
                           "apns-expiration": "<Unix seconds: --expires-in, default 7d; 0 with --deliver-once>",
                           "apns-collapse-id": "<only with --collapse-id>",
                           "apns-topic": "<only with --topic>"},
               "payload": {<the APNs payload>},
               "signed_by": "<sender key id, only with --sign-with>"}

            Batch (--batch FILE, or - for stdin): one JSON request per line (only "to" is required, \
            and the message needs a non-empty title, subtitle or body); member names are snake_case \
            (the older "thread-id" is refused with the name to use):

              {"to": {<device key record>}, "title": "...", "body": "...",
               "subtitle": "...", "thread_id": "...", "category": "...",
               "badge": 3, "sound": "...", "data": {...},
               "expires_in": "2h" (or seconds, 7200; default 7d), "deliver_once": true, "collapse_id": "...",
               "topic": "...", "id": "<message id>", "reveal": true}

            and one output line each, in input order:

              {"payload": {...}, "headers": {...}}     sealed (plus "signed_by" with --sign-with)
              {"line": N, "error": "..."}              failed (N counts lines from 1)

            Blank lines are skipped; a failed line never stops the others; the exit status is 1 if \
            any line failed. --padding and --placeholder-title apply to every line; per-message \
            options (--title and the like) are refused with --batch.

            Attachments: --attach FILE[:TYPE] (repeatable, at most 4) encrypts each file under a fresh \
            key into --media-dir DIR, as an object with a random name that --media-url BASE_URL serves \
            (https, or http to localhost / 127.0.0.0/8 / [::1] for development; `sealedpush-server media serve \
            DIR` serves a directory). The sealed body carries each object's URL, key, type and size \
            (about 200 bytes each). TYPE defaults to the one the file's extension names; supported: \
            image/jpeg, image/png, image/gif (up to 10 MB), audio/mpeg, audio/wav, audio/aiff, audio/mp4 \
            (5 MB), video/mp4, video/mpeg, video/x-msvideo (50 MB). In a batch, a line's \
            "attachments": [{"file": "...", "type": "...", "name": "..."}] does the same with the \
            --media-dir and --media-url of the command.

            --sign-with DIR signs every message (single or batch) with the active sender key of that \
            sender store; devices that trust its record (`sealedpush trust add`) verify it. The key id \
            that signed is named as "signed_by" in --headers output and in every batch output line.

            --reveal (a batch line's "reveal": true) seals a reveal message (reveal v1): iOS is handed only \
            `Secret Message!` / `Press and hold to read`, and the text is sealed a second time, to the reveal key \
            in the record's `reveal` member, for the app's content extension to open when the user presses and \
            holds on an unlocked phone. A record without `reveal` is refused (the text is never sealed to the \
            device key instead); less text fits, and a message too large is refused with how much does.

            Examples:
              sealedpush seal --to device-key.json --title "Agent K" \\
                  --body "The eagle lands at noon."
              sealedpush seal --to device-key.json --body "Meet at 6" \\
                  --thread-id ops-7 --badge 3 --expires-in 2h --headers
              sealedpush seal --to device-key.json --body "Hi" --padding max \\
                  --placeholder-title "New message"
              sealedpush seal --to device-key.json --title "Agent K" --body "Burn after reading" --reveal
              sealedpush seal --batch messages.jsonl > payloads.jsonl
              cat messages.jsonl | sealedpush seal --batch - > payloads.jsonl
            """
    )

    @Option(name: .long, help: ArgumentHelp("The device key record to seal to (JSON file, or - for stdin).", valueName: "DEVICE_KEY.json"))
    var to: String?

    @Option(name: .long, help: ArgumentHelp("Seal one message per line of this JSONL file (- for stdin) instead of a single message.", valueName: "IN.jsonl"))
    var batch: String?

    @Option(name: .long, help: ArgumentHelp("The apns-topic header (the app's bundle id).", valueName: "TOPIC"))
    var topic: String?

    @Flag(name: .long, help: "Print {\"headers\":{…},\"payload\":{…}} (and \"signed_by\" with --sign-with) instead of the bare payload.")
    var headers = false

    @OptionGroup(title: "Message") var sealing: SealingOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if let batch {
            guard !batch.isEmpty else { throw ValidationError("--batch needs a file path, or - for stdin.") }
            guard to == nil else { throw ValidationError("--to cannot be used with --batch: each line names its device in \"to\".") }
            if !sealing.attach.isEmpty {
                throw ValidationError("--attach cannot be used with --batch: give \"attachments\" per line in the JSONL input.")
            }
            let option = sealing.perMessageOption ?? [("--topic", topic != nil), ("--headers", headers)].first { $0.1 }?.0
            if let option { throw ValidationError("\(option) cannot be used with --batch: give it per line in the JSONL input.") }
        } else {
            guard let to, !to.isEmpty else { throw ValidationError("Missing --to DEVICE_KEY.json (or use --batch IN.jsonl).") }
            try sealing.validateText()
        }
        if let topic, topic.isEmpty { throw ValidationError("--topic must not be empty.") }
    }

    func run() async throws {
        logging.apply(default: .notice)
        let sender = try sealing.sender()
        let mediaStore = try sealing.mediaStore()
        if let batch {
            try await BatchRunner(sealer: JSONLSealer(sender: sender, mediaStore: mediaStore, mediaSource: try sealing.mediaSourceDirectory())).run(path: batch)
            return
        }
        guard let to else { throw ValidationError("Missing --to DEVICE_KEY.json.") }
        let record = try readDeviceRecord(to)
        let message = try sealing.message(topic: topic, mediaStore: mediaStore)
        let sealed: SealedNotification
        sealed = try sender.seal(message, to: record)
        if let receiptsDB = sealing.receiptsDB { try await ReceiptsRecording.record(sealed, database: receiptsDB) }
        var out: [UInt8] = []
        if headers {
            out.append(contentsOf: #"{"headers":"#.utf8)
            sealed.headers.writeJSON(into: &out)
            out.append(contentsOf: #","payload":"#.utf8)
            out.append(contentsOf: sealed.payload)
            JSONLSealer.writeSignedBy(sealed, into: &out)
            out.append(UInt8(ascii: "}"))
        } else {
            out.append(contentsOf: sealed.payload)
        }
        if StandardIO.outputIsTerminal { out.append(0x0a) }
        StandardIO.writeOutput(out)
    }
}

/// Reads the device key record of `--to` (a file, or - for standard input).
func readDeviceRecord(_ path: String) throws -> DeviceKeyRecord {
    let recordBytes = try readInput(path, limit: 64 * 1024, what: "the device key record")
    do { return try DeviceKeyRecord(jsonBytes: recordBytes) } catch {
        throw CLIError("\(path): \(recordAdvice(error, export: "keys export"))")
    }
}


/// Streams a JSONL batch: reads large blocks, seals complete lines on every core, writes results in order.
struct BatchRunner {
    let sealer: JSONLSealer
    /// Bytes read per block.
    static let readSize = 1 << 20
    /// Output is flushed once it passes this many bytes.
    static let flushSize = 1 << 20
    /// The longest line accepted.
    static let maxLineBytes = 1 << 20

    /// One worker's share of a block: lines (ranges into the block; `nil` for a line too long to hold)
    /// and its reused output buffer.
    struct Work: Sendable {
        var lines: [(number: Int, range: Range<Int>?)] = []
        var output: [UInt8] = []
        var failures = 0
        var nonBlank = 0
    }

    func run(path: String) async throws {
        let input = try InputFile.openBatch(path)
        defer { input.close() }

        let workers = max(1, min(ProcessInfo.processInfo.activeProcessorCount, 8))
        var works = [Work](repeating: Work(), count: workers)
        // One line rule for both batch paths (JSONLLineSplitter): a line over maxLineBytes is reported once.
        var splitter = JSONLLineSplitter(maxLineBytes: BatchRunner.maxLineBytes)
        var output: [UInt8] = []
        output.reserveCapacity(BatchRunner.flushSize + 64 * 1024)
        var total = 0
        var failures = 0
        var atEOF = false

        while !atEOF {
            let chunk = try input.read(upToCount: BatchRunner.readSize)
            atEOF = chunk.isEmpty
            let lines: [(number: Int, range: Range<Int>?)] = splitter.feed(chunk).map { item in
                switch item {
                case let .line(number, range): (number, range)
                case let .tooLong(number): (number, nil)
                }
            }
            if !lines.isEmpty {
                let block = splitter.buffer
                // Workers take contiguous shares, so their outputs joined in order keep the input's order.
                let per = (lines.count + workers - 1) / workers
                for w in 0..<workers {
                    works[w].lines.removeAll(keepingCapacity: true)
                    works[w].output.removeAll(keepingCapacity: true)
                    works[w].failures = 0
                    works[w].nonBlank = 0
                    let lower = min(w * per, lines.count), upper = min(lower + per, lines.count)
                    works[w].lines.append(contentsOf: lines[lower..<upper])
                }
                let sealer = self.sealer
                if workers == 1 || lines.count < 4 {
                    for w in 0..<workers { BatchRunner.process(&works[w], block: block, sealer: sealer) }
                } else {
                    works = await withTaskGroup(of: (Int, Work).self, returning: [Work].self) { group in
                        for (w, work) in works.enumerated() {
                            group.addTask {
                                var mine = work
                                BatchRunner.process(&mine, block: block, sealer: sealer)
                                return (w, mine)
                            }
                        }
                        var done = [Work](repeating: Work(), count: workers)
                        for await (w, work) in group { done[w] = work }
                        return done
                    }
                }
                for w in 0..<workers {
                    output.append(contentsOf: works[w].output)
                    failures += works[w].failures
                    total += works[w].nonBlank
                }
            }
            if output.count >= BatchRunner.flushSize || atEOF {
                if !output.isEmpty { StandardIO.writeOutput(output) }
                output.removeAll(keepingCapacity: true)
            }
        }
        if failures > 0 {
            printError("Error: \(failures) of \(total) batch lines failed; see the {\"line\":N,\"error\":…} lines on stdout")
            throw ExitCode.failure
        }
    }

    static func process(_ work: inout Work, block: [UInt8], sealer: JSONLSealer) {
        for (number, range) in work.lines {
            guard let range else {
                JSONLSealer.writeError(.invalidRequest("the line is over \(BatchRunner.maxLineBytes) bytes"), line: number, into: &work.output)
                work.failures += 1
                work.nonBlank += 1
                continue
            }
            let outcome = sealer.process(line: block.span.extracting(range), number: number, into: &work.output)
            if outcome == .failed { work.failures += 1 }
            if outcome != .blank { work.nonBlank += 1 }
        }
    }
}

/// `--padding bucket|none|max`: the wire module's policy itself is the option's value.
extension PaddingPolicy: @retroactive ExpressibleByArgument {}
