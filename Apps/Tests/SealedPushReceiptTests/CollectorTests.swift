import Foundation
import Testing
import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import SealedPushCrypto
import SealedPushWire
import SealedPushReceiptCollector
import SealedPushTime
import SealedPushReceiptsDatabase
import SealedPushTestSupport
import ServiceLifecycle
import Logging

/// A collector served over a real loopback socket (port 0) for one test.
final class RunningCollector: Sendable {
    let database: ReceiptsDatabase
    let port: Int
    let task: Task<Void, any Error>
    let group: ServiceGroup

    private init(database: ReceiptsDatabase, port: Int, task: Task<Void, any Error>, group: ServiceGroup) {
        self.database = database
        self.port = port
        self.task = task
        self.group = group
    }

    static func start(path: String, port: Int = 0, maxRate: Int = 50_000,
                      clock: SealedPushClock = .system) async throws -> RunningCollector {
        let database = try await ReceiptsDatabase.open(path: path)
        let collector = ReceiptCollector(database: database, maxRequestsPerSecond: maxRate, clock: clock)
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let app = collector.application(host: "127.0.0.1", port: port) { bound in continuation.yield(bound) }
        // The stream ends with the server, so a failed bind ends the wait at once (boundPort).
        // Stopped by a graceful shutdown, never by cancelling the server's task: a cancelled NIO server can drop a
        // connection it accepted but had not handed over yet, and NIO traps on it (swift-nio #2637).
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [app], logger: Logger(label: "collector-test")))
        let task = Task {
            defer { continuation.finish() }
            try await group.run()
        }
        let bound: Int
        do { bound = try await boundPort(stream, of: task) } catch {
            await database.close()
            throw error
        }
        return RunningCollector(database: database, port: bound, task: task, group: group)
    }

    var url: String { "http://127.0.0.1:\(port)/r" }

    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
        await database.close()
    }
}

/// POSTs `body` and returns the status.
func post(_ body: [UInt8], to url: String, method: HTTPMethod = .POST) async throws -> Int {
    var request = HTTPClientRequest(url: url)
    request.method = method
    request.headers.add(name: "Content-Type", value: "application/json")
    request.body = .bytes(ByteBuffer(bytes: body))
    // Generous: the collector answers on the cooperative threads, which this run's synchronous process
    // tests can hold for tens of seconds on a 2-core machine; a wrong answer fails at once anyway.
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(120))
    _ = try await response.body.collect(upTo: 1 << 16)
    return Int(response.status.code)
}

func json(_ o: JSONObject) -> [UInt8] { JSON.serialize(.object(o)) }

@Suite("Receipt collector (receipts v1 §4) over loopback", .serialized, .timeLimit(.minutes(10)))
struct CollectorTests {
    let directory: URL

    init() throws {
        TestLogging.quiet()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("collector-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    @Test("every §4 answer: 204 (repeats too, counted once), 404, 403, 400, 413, 202; and 405 for GET")
    func answers() async throws {
        let collector = try await RunningCollector.start(path: directory.appendingPathComponent("r.sqlite").path)
        let kid = KeyID(hex: "e2a0cdd02cd5f429")!
        let token = ReceiptRequest.makeToken()
        try await collector.database.recordExpected(messageID: "m1", token: token, issuedAt: 1_795_000_000, keyID: kid)
        let receipt = ReceiptMessage.delivered(id: "m1", token: token, at: 1_795_000_001, attachments: nil).jsonObject()
        #expect(try await post(json(receipt), to: collector.url) == 204)
        #expect(try await post(json(receipt), to: collector.url) == 204)
        #expect(try await post(json(receipt), to: collector.url + "/other-path") == 204)
        var unknown = receipt
        unknown["id"] = .string("m2")
        #expect(try await post(json(unknown), to: collector.url) == 404)
        var wrong = receipt
        wrong["token"] = .string(ReceiptRequest.makeToken())
        #expect(try await post(json(wrong), to: collector.url) == 403)
        for bad: [UInt8] in [Array("{}".utf8), Array("not json".utf8), json(JSONObject([("v", .int(2)), ("type", .string("delivered"))])),
                             json({ var r = receipt; r["extra"] = .int(1); return r }()),
                             json({ var r = receipt; r["token"] = .string("short"); return r }()),
                             json(ReceiptMessage.failed(reason: .replayed, kid: nil, at: 1, count: 1).jsonObject())] {
            #expect(try await post(bad, to: collector.url) == 400, "\(String(decoding: bad, as: UTF8.self))")
        }
        var padded = receipt
        padded["id"] = .string(String(repeating: "x", count: 5000))
        #expect(try await post(json(padded), to: collector.url) == 413)
        let report = ReceiptMessage.failed(reason: .keychainLocked, kid: kid, at: 1_795_000_002, count: 3).jsonObject(dropped: 2)
        #expect(try await post(json(report), to: collector.url) == 202)
        #expect(try await post([], to: collector.url, method: .GET) == 405)
        let stats = try await collector.database.stats()
        #expect(stats.sent == 1 && stats.delivered == 1 && stats.pending == 0)
        #expect(stats.failuresByReason == ["keychainLocked": 3])
        #expect(stats.failuresByKeyID == ["e2a0cdd02cd5f429": 3])
        #expect(stats.registeredKeyIDs.contains("e2a0cdd02cd5f429"))
        #expect(stats.droppedReported == 2)
        await collector.stop()
    }

    @Test("revealed receipts (reveal v1 §6): 204, counted once and apart from delivered; 404 and 403 as for delivered")
    func revealedReceipts() async throws {
        let collector = try await RunningCollector.start(path: directory.appendingPathComponent("rv.sqlite").path)
        let kid = KeyID(hex: "e2a0cdd02cd5f429")!
        let token = ReceiptRequest.makeToken()
        try await collector.database.recordExpected(messageID: "m1", token: token, issuedAt: 1_795_000_000, keyID: kid)
        try await collector.database.recordExpected(messageID: "m2", token: ReceiptRequest.makeToken(), issuedAt: 1_795_000_000, keyID: kid)
        let revealed = ReceiptMessage.revealed(id: "m1", token: token, at: 1_795_000_050, attachments: nil)
        #expect(try await post(revealed.paddedBody(), to: collector.url) == 204)
        #expect(try await post(revealed.paddedBody(), to: collector.url) == 204)
        var stats = try await collector.database.stats()
        #expect(stats.revealed == 1 && stats.delivered == 0 && stats.sent == 2)
        #expect(try await post(ReceiptMessage.delivered(id: "m1", token: token, at: 1_795_000_010, attachments: nil).paddedBody(), to: collector.url) == 204)
        stats = try await collector.database.stats()
        #expect(stats.revealed == 1 && stats.delivered == 1)
        #expect(stats.jsonObject["revealed"] == .int(1))
        #expect(try await post(ReceiptMessage.revealed(id: "m3", token: token, at: 1, attachments: nil).paddedBody(), to: collector.url) == 404)
        #expect(try await post(ReceiptMessage.revealed(id: "m2", token: token, at: 1, attachments: nil).paddedBody(), to: collector.url) == 403)
        await collector.stop()
    }

    @Test("over the rate limit: 429")
    func rateLimit() async throws {
        // A clock that stands still: the bucket of 2 never refills, however slowly the 4 requests go.
        let frozen = SealedPushManualClock()
        let collector = try await RunningCollector.start(path: directory.appendingPathComponent("rate.sqlite").path, maxRate: 2,
                                                         clock: frozen.clock)
        var statuses: [Int] = []
        for _ in 0..<4 { statuses.append(try await post(Array("{}".utf8), to: collector.url)) }
        #expect(statuses.filter { $0 == 429 }.count >= 1)
        #expect(statuses.filter { $0 == 400 }.count >= 1)
        await collector.stop()
    }

    /// A failure report body (receipts v1 §3).
    func report(_ reason: String = "unknownKey", count: Int64 = 1, dropped: Int64? = nil) -> [UInt8] {
        var o = JSONObject([("v", .int(1)), ("type", .string("failed")), ("reason", .string(reason)), ("kid", .string("e2a0cdd02cd5f429")),
                            ("at", .int(1_800_000_000)), ("count", .int(count))])
        if let dropped { o["dropped"] = .int(dropped) }
        return json(o)
    }

    @Test("failure reports are limited per source address; another source, and receipts, are not held up")
    func reportsLimitedPerSource() async throws {
        let database = try await ReceiptsDatabase.open(path: directory.appendingPathComponent("src.sqlite").path)
        let clock = SealedPushManualClock()  // stands still unless advanced: a slow machine refills nothing
        let collector = ReceiptCollector(database: database, maxReportsPerSourcePerMinute: 3, clock: clock.clock)
        var fromA: [Int] = []
        for _ in 0..<5 { fromA.append(Int(await collector.answer(method: .post, body: report(), tooLarge: false, source: "192.0.2.1").code)) }
        #expect(fromA == [202, 202, 202, 429, 429])
        #expect(await collector.answer(method: .post, body: report(), tooLarge: false, source: "192.0.2.2") == .accepted)
        // A receipt from the flooding address is still answered on its merits (an unknown id here).
        let receipt = json(JSONObject([("v", .int(1)), ("type", .string("delivered")), ("id", .string("m")),
                                       ("token", .string(ReceiptRequest.makeToken())), ("at", .int(1))]))
        #expect(await collector.answer(method: .post, body: receipt, tooLarge: false, source: "192.0.2.1") == .notFound)
        #expect(try await database.stats().failuresByReason["unknownKey"] == 4)
        // 3 a minute: the injected clock's 10 s refill half a report, its 20 s one report, and no more.
        clock.advance(by: .seconds(10))
        #expect(await collector.answer(method: .post, body: report(), tooLarge: false, source: "192.0.2.1") == .tooManyRequests)
        clock.advance(by: .seconds(10))
        #expect(await collector.answer(method: .post, body: report(), tooLarge: false, source: "192.0.2.1") == .accepted)
        #expect(await collector.answer(method: .post, body: report(), tooLarge: false, source: "192.0.2.1") == .tooManyRequests)
        #expect(try await database.stats().failuresByReason["unknownKey"] == 5)
        await database.close()
    }

    @Test("a report counts for at most maximumReportCount failures and dropped entries; reports older than 30 days are deleted")
    func reportCountsCappedAndExpired() async throws {
        let database = try await ReceiptsDatabase.open(path: directory.appendingPathComponent("cap.sqlite").path)
        let collector = ReceiptCollector(database: database)
        #expect(await collector.answer(method: .post, body: report(count: Int64(Int32.max), dropped: Int64(Int32.max)), tooLarge: false) == .accepted)
        var stats = try await database.stats()
        #expect(stats.failuresByReason["unknownKey"] == ReceiptsDatabase.maximumReportCount)
        #expect(stats.droppedReported == ReceiptsDatabase.maximumReportCount)
        // Expiry, on the database's own clock (milliseconds received).
        let t0: Int64 = 1_800_000_000_000
        try await database.recordFailure(reason: .decryptionFailed, kid: nil, at: 1, count: 5, dropped: 0, receivedMilliseconds: t0)
        try await database.recordFailure(reason: .decryptionFailed, kid: nil, at: 1, count: 7, dropped: 0,
                                         receivedMilliseconds: t0 + ReceiptsDatabase.reportRetentionMilliseconds + 1)
        stats = try await database.stats()
        #expect(stats.failuresByReason["decryptionFailed"] == 7, "the 30-day-old report was not deleted")
        await database.close()
    }

    @Test("the database and its WAL and shared-memory files are 0600 whatever the umask")
    func databaseFilesArePrivate() async throws {
        let path = directory.appendingPathComponent("modes.sqlite").path
        let old = umask(0o022)
        defer { umask(old) }
        let database = try await ReceiptsDatabase.open(path: path)
        try await database.recordExpected(messageID: "m", token: ReceiptRequest.makeToken(), issuedAt: 1,
                                          keyID: KeyID(hex: "e2a0cdd02cd5f429")!)
        for file in [path, path + "-wal", path + "-shm"] {
            let mode = (try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) ?? -1
            #expect(mode == 0o600, "\(file) is \(String(mode, radix: 8))")
        }
        await database.close()
    }

    @Test("concurrent repeats of one receipt count the message once")
    func concurrentRepeats() async throws {
        let collector = try await RunningCollector.start(path: directory.appendingPathComponent("c.sqlite").path)
        let token = ReceiptRequest.makeToken()
        try await collector.database.recordExpected(messageID: "m", token: token, issuedAt: 1, keyID: KeyID(hex: "e2a0cdd02cd5f429")!)
        let body = json(ReceiptMessage.delivered(id: "m", token: token, at: 2, attachments: nil).jsonObject())
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<16 { group.addTask { try await post(body, to: collector.url) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.allSatisfy { $0 == 204 })
        let stats = try await collector.database.stats()
        #expect(stats.sent == 1 && stats.delivered == 1)
        await collector.stop()
    }
}
