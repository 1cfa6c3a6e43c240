import Foundation
import Synchronization
import Testing
import SealedPushCrypto
import SealedPushKeychain
import SealedPushTestSupport
import SealedPushWire

/// A fresh private (0700) directory for one test, removed when the value is released.
final class TempDirectory: Sendable {
    let url: URL

    init() throws {
        TestLogging.quiet()
        url = FileManager.default.temporaryDirectory.appendingPathComponent("kc-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// The store root inside the directory (created by the store itself).
    var store: URL { url.appendingPathComponent("store") }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let date: Mutex<Date>

    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        TestLogging.quiet()
        date = Mutex(start)
    }

    var now: @Sendable () -> Date { { [self] in self.date.withLock { $0 } } }
    /// This clock as the `WallClock` stores and keyrings take.
    var wall: WallClock { WallClock(now) }
    var current: Date { date.withLock { $0 } }
    var unix: Int64 { Int64(current.timeIntervalSince1970) }

    func advance(_ seconds: TimeInterval) { date.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

func secret(_ text: String) -> SecureBytes { SecureBytes(Array(text.utf8)) }

func text(_ data: SecureBytes?) -> String? { data.map { String(decoding: $0.unsafeCopyToArray(), as: UTF8.self) } }

/// Every regular file under `url` (recursively, hidden files included).
func allFiles(under url: URL) -> [URL] {
    guard let e = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
    return e.compactMap { $0 as? URL }.filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
}

/// Whether `needle` occurs anywhere in `haystack`.
func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
        if Array(haystack[i..<(i + needle.count)]) == needle { return true }
    }
    return false
}

/// Seals a small message to `record`, signed when `signer` is given, as a sender would.
func sealMessage(to record: DeviceKeyRecord, id: String, now: Int64, signer: SigningKeyPair? = nil) throws -> String {
    let body = MessageBody(kid: record.keyID, id: id, issuedAt: now, alert: .init(title: "Hi", body: "secret \(id)"),
                           sender: signer?.keyID)
    return try MessageSealer.seal(body: body, to: record.publicKey, signer: signer, padding: .bucket, payloadOverhead: 200).base64
}

/// Runs the built `keychain-torture` helper.
enum Torture {
    static var binary: URL {
        if let env = ProcessInfo.processInfo.environment["KEYCHAIN_TORTURE_BIN"], !env.isEmpty { return URL(fileURLWithPath: env) }
        // Test bundles live in <scratch>/<triple>/<config>/; the executable sits beside them.
        let candidate = Bundle.main.bundleURL.appendingPathComponent("keychain-torture")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        for scratch in ["kc", "."] {
            for config in ["debug", "release"] {
                let url = ProjectPaths.root.appendingPathComponent(".build/\(scratch)/\(config)/keychain-torture")
                if FileManager.default.isExecutableFile(atPath: url.path) { return url }
            }
        }
        return candidate
    }

    /// Starts the helper with `args`, capturing its output.
    static func start(_ args: [String]) throws -> (Process, Pipe, Pipe) {
        let process = Process()
        process.executableURL = binary
        process.arguments = args
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        return (process, out, err)
    }

    /// Waits for a started helper; returns its status, stdout and stderr.
    static func finish(_ started: (Process, Pipe, Pipe)) -> (status: Int32, out: String, err: String) {
        let (process, out, err) = started
        // Drain the pipes before waiting so a chatty child cannot block on a full pipe.
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
    }

    /// Runs the helper to completion.
    static func run(_ args: [String]) throws -> (status: Int32, out: String, err: String) { finish(try start(args)) }
}

/// A running `keychain-torture` child whose stdout the test reads line by line while it runs, each
/// wait bounded by a deadline, so a test can time a SIGKILL from the child's own progress lines.
///
/// Used from one test function at a time (not shared across tasks), so it needs no locking.
final class TortureChild {
    let process: Process
    private let out: Pipe
    private let err: Pipe
    private var pending: [UInt8] = []
    private var atEnd = false
    /// Every stdout line read so far, in order.
    private(set) var lines: [String] = []
    private var reaped: (status: Int32, err: String)?

    init(_ args: [String]) throws {
        (process, out, err) = try Torture.start(args)
    }

    /// The next stdout line, waiting at most `timeout`; `nil` at end of output or when the time is up.
    func nextLine(within timeout: Duration) -> String? {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        let fd = out.fileHandleForReading.fileDescriptor
        while true {
            if let nl = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[..<nl], as: UTF8.self)
                pending.removeSubrange(...nl)
                lines.append(line)
                return line
            }
            if atEnd { return nil }
            let left = deadline - clock.now
            guard left > .zero else { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(min(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1, 60_000))
            let ready = poll(&pfd, 1, ms)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }  // timed out this poll: the loop re-checks the deadline
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { atEnd = true } else { pending += chunk[0..<n] }
        }
    }

    /// Reads lines until one starts with `prefix` (returning it), or `nil` at end of output or after `timeout`.
    func waitForLine(startingWith prefix: String, within timeout: Duration) -> String? {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while let line = nextLine(within: deadline - clock.now) {
            if line.hasPrefix(prefix) { return line }
        }
        return nil
    }

    /// SIGKILLs the child (if it still runs), reaps it and reads the rest of its output into `lines`.
    /// Returns whether the kill is what ended it.
    @discardableResult
    func killAndReap() -> Bool {
        if reaped == nil { kill(process.processIdentifier, SIGKILL) }
        _ = finish()
        return process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL
    }

    /// Waits for the child to exit; reads all its remaining output. Idempotent.
    @discardableResult
    func finish() -> (status: Int32, err: String) {
        if let reaped { return reaped }
        while nextLine(within: .seconds(60)) != nil {}
        if !pending.isEmpty {
            lines.append(String(decoding: pending, as: UTF8.self))
            pending = []
        }
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let result = (process.terminationStatus, String(decoding: errData, as: UTF8.self))
        reaped = result
        return result
    }

    /// What the child wrote to stderr (after `finish`/`killAndReap`).
    var stderrText: String { reaped?.err ?? "" }

    deinit {
        // A test that stopped early (a failed #require) must not leave a child running.
        if reaped == nil {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
