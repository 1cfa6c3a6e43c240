import SealedPushCLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Hummingbird
import Logging
import SealedPushCrypto
import SealedPushReceiptCollector
import SealedPushReceiptsDatabase
import SealedPushSender
import SealedPushWire

/// `sealedpush-server receipts`: the receipt collector and its figures (receipts v1 §4).
struct ReceiptsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipts",
        abstract: "Collect delivery receipts and failure reports, and print their figures.",
        subcommands: [Serve.self, Stats.self])

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the receipt collector: an HTTP server counting receipts in an SQLite database.",
            discussion: """
                Answers POSTs on any path as receipts v1 §4 says: 204 for a receipt whose token matches the one \
                `seal --receipts-db` recorded for its id (repeats too, counted once), 404 for an unknown id, 403 \
                for a wrong token, 400 for a body that is not a receipt or failure report, 413 over 4096 bytes, \
                202 for a failure report, 429 over --max-rate (checked before the body is read) or over \
                --max-reports-per-source failure reports a minute from one address. A stored report counts for \
                at most 1000 failures, and reports are kept 30 days. The database and its WAL are created 0600. Prints `listening on HOST:PORT` once bound \
                (port 0 picks a free one). The database is in WAL mode, so `seal --receipts-db` records while \
                this serves. Tokens are never logged or stored (only their SHA-256). Runs until SIGTERM or \
                SIGINT, then stops accepting, answers the requests in flight, closes the database and exits 0.

                Example: sealedpush-server receipts serve --db receipts.sqlite --listen 127.0.0.1:8089
                """)
        @Option(help: ArgumentHelp("The SQLite database (created if missing).", valueName: "FILE"))
        var db: String
        @Option(help: ArgumentHelp("The address to listen on.", valueName: "HOST:PORT"))
        var listen = HostPort(host: "127.0.0.1", port: 8089)
        @OptionGroup var logging: LoggingOptions
        @Option(name: .customLong("max-rate"), help: ArgumentHelp("The most requests answered per second (429 above).", valueName: "N"))
        var maxRate = 50_000
        @Option(name: .customLong("max-reports-per-source"), help: ArgumentHelp(
            "The most failure reports one address may send a minute (429 above).", valueName: "N"))
        var maxReportsPerSource = 60

        func validate() throws {
            guard maxRate >= 1 else { throw ValidationError("--max-rate must be at least 1.") }
            guard maxReportsPerSource >= 1 else { throw ValidationError("--max-reports-per-source must be at least 1.") }
        }


        func run() async throws {
            logging.apply(default: .notice)
            let (host, port) = (listen.host, listen.port)
            let database = try await ReceiptsDatabase.open(path: db)
            let collector = ReceiptCollector(database: database, maxRequestsPerSecond: maxRate,
                                             maxReportsPerSourcePerMinute: maxReportsPerSource)
            let app = collector.application(host: host, port: port) { bound in
                StandardIO.writeOutput(Array("listening on \(listen.with(port: bound))\n".utf8))
            }
            let logger = Logger(label: "sealedpush.receipts")
            // The database first: the group stops the HTTP server before it closes the database.
            do { try await runUntilSignalled([ReceiptsDatabaseService(database: database), app], logger: logger) } catch {
                throw CLIError("the collector stopped: \(error); check that \(listen) is free and allowed")
            }
        }
    }

    struct Stats: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the receipt figures: sent, delivered, pending, delivery rate, latency, failures.",
            discussion: """
                sent: messages sealed with a receipt requested (`seal --receipts-db`); delivered: those whose \
                receipt arrived (each once); pending; delivery rate; time from issue to receipt (p50/p95/p99, \
                seconds); attachment failures by reason; failure reports by reason and by envelope key id \
                (marked registered when messages were sealed to that key: that device's key record is stale).

                Example: sealedpush-server receipts stats --db receipts.sqlite --since 1d --json
                """)
        @Option(help: ArgumentHelp("The SQLite database.", valueName: "FILE"))
        var db: String
        @Option(parsing: .unconditional, help: ArgumentHelp("Only messages issued (and reports received) this long ago or later.", valueName: "DURATION"))
        var since: DurationArgument?
        @OptionGroup var output: JSONOutputOptions

        func run() async throws {
            guard FileManager.default.fileExists(atPath: db) else {
                throw CLIError("the receipts database \(db) does not exist; give the file `seal --receipts-db` and `receipts serve --db` use")
            }
            let from = since.map { Int64(Date().timeIntervalSince1970) - $0.milliseconds / 1000 } ?? 0
            let stats = try await ReceiptsDatabase.withOpened(path: db) { database throws(ReceiptsDatabaseError) in
                try await database.stats(since: from)
            }
            if output.json {
                print(String(decoding: JSON.serialize(.object(stats.jsonObject)), as: UTF8.self))
                return
            }
            print(Self.render(stats))
        }

        static func render(_ s: ReceiptStats) -> String {
            func fixed(_ x: Double, _ digits: Int = 3) -> String {
                let scale = Double((0..<digits).reduce(1) { a, _ in a * 10 })
                let v = (x * scale).rounded() / scale
                return "\(v)"
            }
            var lines = ["\(s.sent) sent, \(s.delivered) delivered, \(s.pending) pending"]
            lines.append("delivery rate: " + (s.deliveryRate.map { fixed($0 * 100, 1) + "%" } ?? "-"))
            lines.append("revealed: \(s.revealed)")
            if let p = s.issueToReceiptSeconds {
                lines.append("issue to receipt: p50 \(fixed(p.p50)) s, p95 \(fixed(p.p95)) s, p99 \(fixed(p.p99)) s")
            } else {
                lines.append("issue to receipt: -")
            }
            lines.append("attachment failures: " + (s.attachmentFailures.isEmpty ? "none"
                : s.attachmentFailures.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")))
            lines.append("failure reports by reason: " + (s.failuresByReason.isEmpty ? "none"
                : s.failuresByReason.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")))
            lines.append("failure reports by key id: " + (s.failuresByKeyID.isEmpty ? "none"
                : s.failuresByKeyID.sorted { $0.key < $1.key }.map {
                    "\($0.key) \($0.value)" + (s.registeredKeyIDs.contains($0.key) ? " (registered: re-register this device's key)" : "")
                }.joined(separator: ", ")))
            if s.droppedReported > 0 { lines.append("entries devices dropped from their outbox: \(s.droppedReported)") }
            return lines.joined(separator: "\n")
        }
    }
}
