// The demo's receipts part (issue #14): the server asks for receipts and runs a collector on loopback;
// the device has a report URL.
import SealedPushCLI
import SealedPushDevice
import SealedPushKeychain
import SealedPushReceiver
import SealedPushSender
import SealedPushWire
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import SealedPushReceiptCollector
import SealedPushDeviceHTTP
import SealedPushReceiptsDatabase

/// A receipt collector on 127.0.0.1 (any free port) for the demo, and the device's HTTP transport. The
/// collector and its database run as services in a background group, stopped gracefully.
final class DemoReceipts: Sendable {
    let database: ReceiptsDatabase
    let port: Int
    let services: BackgroundServices
    let transport = HTTPReceiptTransport()

    private init(database: ReceiptsDatabase, port: Int, services: BackgroundServices) {
        self.database = database
        self.port = port
        self.services = services
    }

    /// Starts the collector over a database in `base` and sets the device's report URL; `nil` if it cannot start.
    static func start(in base: URL, device: KeychainStore, logger: Logger) async -> DemoReceipts? {
        guard let database = try? await ReceiptsDatabase.open(path: base.appendingPathComponent("receipts.sqlite").path)
        else { return nil }
        let (bound, continuation) = AsyncStream<Int>.makeStream()
        let app = ReceiptCollector(database: database, logger: logger).application(host: "127.0.0.1", port: 0, httpLogger: logger) {
            continuation.yield($0)
            continuation.finish()
        }
        // The database first: the group stops the collector before it closes the database.
        let services = BackgroundServices([ReceiptsDatabaseService(database: database), app], logger: logger)
        var port = 0
        for await p in bound { port = p; break }
        let receipts = DemoReceipts(database: database, port: port, services: services)
        guard port != 0 else {
            await receipts.stop()
            return nil
        }
        do { try ReceiptOutboxStore(store: device).setReportURL(receipts.reportURL) } catch {
            await receipts.stop()
            return nil
        }
        return receipts
    }

    var receiptURL: String { "http://127.0.0.1:\(port)/receipts" }
    var reportURL: String { "http://127.0.0.1:\(port)/reports" }

    /// Seals `message` asking for a receipt, and records the expected receipt (`seal --receipt-url --receipts-db`).
    func seal(_ sender: NotificationSender, _ message: SecretMessage, _ record: DeviceKeyRecord) async throws -> [UInt8] {
        var asking = message
        asking.receiptURL = receiptURL
        let sealed: SealedNotification
        do { sealed = try sender.seal(asking, to: record) } catch { throw CLIError("demo could not seal: \(error.description)") }
        if let receipt = sealed.receipt {
            do { try await database.recordExpected(messageID: sealed.messageID, token: receipt.token, issuedAt: sealed.issuedAt, keyID: sealed.keyID) } catch {
                throw CLIError("demo could not record the receipt: \(error.description)")
            }
        }
        return sealed.payload
    }

    /// The device's courier: its outbox and report URL, this transport.
    func courier(_ device: KeychainStore) -> ReceiptCourier { SimulatedDevice(store: device).receiptCourier(transport: transport) }

    /// "N sent, N delivered" from the collector's database.
    func summary() async -> String {
        guard let stats = try? await database.stats() else { return "receipts: the database could not be read" }
        return "\(stats.sent) sent, \(stats.delivered) delivered"
    }

    /// How many failures of `reason` the collector's reports stand for, as `reason × n`.
    func reports(_ reason: ReasonCode) async -> String {
        let count = (try? await database.stats())?.failuresByReason[reason.rawValue] ?? 0
        return "\(reason) × \(count)"
    }

    /// Shuts the device's transport down, then the collector and its database (gracefully).
    func stop() async {
        await transport.shutdown()
        await services.stop()
    }
}

extension Demo {
    /// The receipts part of the demo, called once from `play()`: starts the collector (the server asks for
    /// receipts from here on) and returns it.
    func startReceipts(_ device: KeychainStore) async -> DemoReceipts? {
        let receipts = await DemoReceipts.start(in: base, device: device, logger: quietLogger)
        if let receipts {
            note("Receipts: the server asks each message for a receipt at \(receipts.receiptURL) (sealedpush-server receipts serve);")
            note("the device reports failures to \(receipts.reportURL) (sealedpush device config --report-url).")
        }
        return receipts
    }
}
