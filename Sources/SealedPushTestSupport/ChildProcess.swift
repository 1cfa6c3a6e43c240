public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The one way the test suites start a child process (`sealedpush`, `sealedpush-server`, `keychain-torture`,
/// Python, a shell, the benchmark).
///
/// Two uses:
/// - **run to completion**: `ChildProcess.run(...)` (or `sealedpush(...)`/`sealedpushServer(...)`) feeds
///   `stdin`, waits up to `timeout`, then kills the child and throws `ChildProcess.Failure.timedOut`.
/// - **a long-lived child** (a server, a crash-test writer): `ChildProcess(launching:...)` with
///   `readLines: true` reads its standard output line by line, each wait bounded (`nextLine(within:)`);
///   `terminate()` sends SIGTERM, waits a bounded time, then SIGKILLs; `kill()` SIGKILLs at once; both reap
///   the child and return its `Result`.
///
/// Standard error (and standard output unless lines are read) goes to files in a private scratch
/// directory, so a child that writes a lot never blocks on a full pipe; a child that limits its own file
/// sizes (RLIMIT_FSIZE) takes `outputThroughPipes`, and both are pipes this side drains while it waits. A child still running when the
/// value is released is SIGKILLed and reaped.
public final class ChildProcess: Sendable {
    /// What a finished child produced.
    public struct Result: Sendable {
        /// The exit status, or the signal number when a signal ended the child.
        public let status: Int32
        /// Whether the child exited (rather than being ended by a signal).
        public let exitedNormally: Bool
        /// Everything the child wrote to standard output (for a line-read child: the lines read too).
        public let stdout: [UInt8]
        /// Everything the child wrote to standard error.
        public let stderrBytes: [UInt8]

        /// Standard output as text.
        public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
        /// Standard error as text.
        public var stderr: String { String(decoding: stderrBytes, as: UTF8.self) }
        /// Standard output split into non-empty lines.
        public var stdoutLines: [String] { stdoutText.split(separator: "\n").map(String.init) }
        /// Whether `signal` ended the child.
        public func killed(by signal: Int32) -> Bool { !exitedNormally && status == signal }
    }

    /// Why a child could not be run or waited for.
    public enum Failure: Error, CustomStringConvertible {
        /// No executable file at the path.
        case missingExecutable(String)
        /// The child did not finish in time and was killed; what it had written by then.
        case timedOut(command: String, seconds: Double, stdout: String, stderr: String)

        /// A readable explanation.
        public var description: String {
            switch self {
            case let .missingExecutable(path):
                return "no executable at \(path): build it first (swift build --build-tests) or set the variable that names it"
            case let .timedOut(command, seconds, stdout, stderr):
                return "\(command) did not finish within \(seconds) s and was killed; stdout: \(stdout.suffix(2000)) stderr: \(stderr.suffix(2000))"
            }
        }
    }

    private struct State {
        /// Bytes read from the stdout pipe not yet returned as a line.
        var pending: [UInt8] = []
        /// Every byte read from the stdout pipe.
        var stdoutSoFar: [UInt8] = []
        /// Every line returned so far.
        var lines: [String] = []
        var atEnd = false
        /// Every byte read from the stderr pipe.
        var stderrSoFar: [UInt8] = []
        var stderrAtEnd = false
        var result: Result?
    }

    private let process: Process
    private let command: String
    private let scratch: URL
    private let stdoutFile: URL?
    private let stdoutPipe: Pipe?
    private let stderrPipe: Pipe?
    private let state = Mutex(State())

    /// Starts `executable` with `arguments`, `environment` over the current environment, in `directory`
    /// (default: the current one), with `stdin` as its whole standard input (default: empty). With
    /// `readLines`, standard output is a pipe read through `nextLine(within:)`; otherwise a file. With
    /// `outputThroughPipes`, standard output and standard error are both pipes (lines can be read too).
    public init(launching executable: URL, _ arguments: [String], stdin: [UInt8]? = nil, environment: [String: String] = [:],
                in directory: URL? = nil, readLines: Bool = false, outputThroughPipes: Bool = false) throws {
        TestLogging.quiet()
        guard FileManager.default.isExecutableFile(atPath: executable.path) else { throw Failure.missingExecutable(executable.path) }
        command = ([executable.lastPathComponent] + arguments).joined(separator: " ").prefix(300).description
        scratch = try makeScratchDirectory("child")
        let errURL = scratch.appendingPathComponent("stderr"), inURL = scratch.appendingPathComponent("stdin")
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: inURL.path, contents: Data(stdin ?? []))
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        if let directory { process.currentDirectoryURL = directory }
        // Process keeps the handles it was given until the child is reaped; the child holds its own copies.
        process.standardInput = try FileHandle(forReadingFrom: inURL)
        if outputThroughPipes {
            let pipe = Pipe()
            process.standardError = pipe
            stderrPipe = pipe
        } else {
            process.standardError = try FileHandle(forWritingTo: errURL)
            stderrPipe = nil
        }
        if readLines || outputThroughPipes {
            let pipe = Pipe()
            process.standardOutput = pipe
            stdoutPipe = pipe
            stdoutFile = nil
        } else {
            let outURL = scratch.appendingPathComponent("stdout")
            _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
            process.standardOutput = try FileHandle(forWritingTo: outURL)
            stdoutFile = outURL
            stdoutPipe = nil
        }
        self.process = process
        do { try process.run() } catch {
            try? FileManager.default.removeItem(at: scratch)
            throw error
        }
        // The parent's copy of the pipe's write end must close, or reading would never see end of file.
        try? stdoutPipe?.fileHandleForWriting.close()
        try? stderrPipe?.fileHandleForWriting.close()
    }

    deinit {
        if process.isRunning {
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: scratch)
    }

    // MARK: Run to completion

    /// Runs `executable` to completion (see `init(launching:...)`); after `timeout` seconds it is killed and
    /// this throws `Failure.timedOut`.
    public static func run(_ executable: URL, _ arguments: [String], stdin: [UInt8]? = nil, environment: [String: String] = [:],
                           in directory: URL? = nil, timeout: TimeInterval = 120, outputThroughPipes: Bool = false) throws -> Result {
        try ChildProcess(launching: executable, arguments, stdin: stdin, environment: environment, in: directory,
                         outputThroughPipes: outputThroughPipes)
            .waitForExit(within: .milliseconds(Int64(timeout * 1000)))
    }

    /// Runs the built `sealedpush` (`ProjectPaths.sealedpushBinary`) to completion; see `run`.
    public static func sealedpush(_ arguments: [String], stdin: [UInt8]? = nil, environment: [String: String] = [:],
                                  in directory: URL? = nil, timeout: TimeInterval = 120) throws -> Result {
        try run(ProjectPaths.sealedpushBinary, arguments, stdin: stdin, environment: environment, in: directory, timeout: timeout)
    }

    /// Runs the built `sealedpush-server` (`ProjectPaths.sealedpushServerBinary`) to completion; see `run`.
    public static func sealedpushServer(_ arguments: [String], stdin: [UInt8]? = nil, environment: [String: String] = [:],
                                        in directory: URL? = nil, timeout: TimeInterval = 120) throws -> Result {
        try run(ProjectPaths.sealedpushServerBinary, arguments, stdin: stdin, environment: environment, in: directory, timeout: timeout)
    }

    // MARK: A running child

    /// The child's process id.
    public var processIdentifier: Int32 { process.processIdentifier }

    /// Whether the child still runs.
    public var isRunning: Bool { process.isRunning }

    /// The child's result once it has been reaped (by `waitForExit`, `terminate` or `kill`), else `nil`.
    public var result: Result? { state.withLock { $0.result } }

    /// Every standard output line returned so far by `nextLine`/`waitForLine`, in order.
    public var lines: [String] { state.withLock { $0.lines } }

    /// What the child has written to standard error so far.
    public var stderrText: String {
        if stderrPipe != nil { return state.withLock { String(decoding: $0.stderrSoFar, as: UTF8.self) } }
        return (try? String(contentsOf: scratch.appendingPathComponent("stderr"), encoding: .utf8)) ?? ""
    }

    /// The next standard output line (without its newline), waiting at most `timeout`; `nil` at the end of
    /// output or when the time is up. Only for a child started with `readLines: true`.
    public func nextLine(within timeout: Duration = .seconds(30)) -> String? {
        precondition(stdoutPipe != nil, "nextLine needs a child started with readLines or outputThroughPipes")
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        return state.withLock { s -> String? in
            while true {
                if let nl = s.pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: s.pending[..<nl], as: UTF8.self)
                    s.pending.removeSubrange(...nl)
                    s.lines.append(line)
                    return line
                }
                if s.atEnd { return nil }
                let left = deadline - clock.now
                guard left > .zero else { return nil }
                readChunk(into: &s, waiting: left)
            }
        }
    }

    /// Reads lines until one starts with `prefix` (returning it); `nil` at the end of output or after `timeout`.
    public func waitForLine(startingWith prefix: String, within timeout: Duration = .seconds(30)) -> String? {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while let line = nextLine(within: deadline - clock.now) {
            if line.hasPrefix(prefix) { return line }
        }
        return nil
    }

    /// Waits up to `timeout` for the child to exit (reading its output meanwhile, so it never blocks) and
    /// returns its result; if it is still running then, SIGKILLs and reaps it and throws `Failure.timedOut`.
    @discardableResult
    public func waitForExit(within timeout: Duration) throws -> Result {
        if let done = result { return done }
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        if !waitUntilExited(by: deadline) {
            let killed = kill()
            throw Failure.timedOut(command: command, seconds: Double(timeout.components.seconds), stdout: killed.stdoutText,
                                   stderr: killed.stderr)
        }
        return reap()
    }

    /// Sends SIGTERM, waits up to `grace` for the child to exit, then SIGKILLs it; reaps it and returns its
    /// result (`killed(by: SIGKILL)` tells that SIGTERM was not enough). A child may inherit SIGTERM blocked
    /// from the test runner, hence the bound.
    @discardableResult
    public func terminate(grace: Duration = .seconds(10)) -> Result {
        if let done = result { return done }
        // Only while it runs: once Foundation has reaped the child, its pid may belong to another process.
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGTERM) }
        if !waitUntilExited(by: ContinuousClock.now + grace) { Glibc.kill(process.processIdentifier, SIGKILL) }
        return reap()
    }

    /// SIGKILLs the child (if it still runs), reaps it and returns its result.
    @discardableResult
    public func kill() -> Result {
        if let done = result { return done }
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        return reap()
    }

    // MARK: Internals

    /// Polls until the child has exited or `deadline` passes, reading the stdout pipe meanwhile.
    private func waitUntilExited(by deadline: ContinuousClock.Instant) -> Bool {
        while process.isRunning {
            if ContinuousClock.now >= deadline { return false }
            if stdoutPipe != nil || stderrPipe != nil {
                state.withLock { s in readChunk(into: &s, waiting: .milliseconds(5)) }
            } else {
                usleep(5_000)
            }
        }
        return true
    }

    /// Waits for the exited (or killed) child, reads the rest of its output and records the result.
    private func reap() -> Result {
        process.waitUntilExit()
        return state.withLock { s -> Result in
            if let done = s.result { return done }
            // The child is gone, so the pipe ends once every byte is read (unless a grandchild still holds it:
            // bounded anyway).
            let drainDeadline = ContinuousClock.now + .seconds(10)
            while ((stdoutPipe != nil && !s.atEnd) || (stderrPipe != nil && !s.stderrAtEnd)) && ContinuousClock.now < drainDeadline {
                readChunk(into: &s, waiting: .milliseconds(100))
            }
            // What the child wrote before it ended counts as lines read (the last one possibly unterminated).
            if !s.pending.isEmpty {
                s.lines += s.pending.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) }
                s.pending = []
            }
            let stdout = stdoutFile.map { (try? [UInt8](Data(contentsOf: $0))) ?? [] } ?? s.stdoutSoFar
            let stderr = stderrPipe != nil ? s.stderrSoFar : (try? [UInt8](Data(contentsOf: scratch.appendingPathComponent("stderr")))) ?? []
            let result = Result(status: process.terminationStatus, exitedNormally: process.terminationReason == .exit,
                                stdout: stdout, stderrBytes: stderr)
            s.result = result
            return result
        }
    }

    /// Waits up to `wait` for an open output pipe to be readable and reads what is there (sleeps out `wait`
    /// when no pipe is open).
    private func readChunk(into s: inout State, waiting wait: Duration) {
        var fds: [pollfd] = []
        if let pipe = stdoutPipe, !s.atEnd { fds.append(pollfd(fd: pipe.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)) }
        if let pipe = stderrPipe, !s.stderrAtEnd { fds.append(pollfd(fd: pipe.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)) }
        let ms = Int32(min(wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000 + 1, 1_000))
        guard !fds.isEmpty else {
            usleep(useconds_t(ms) * 1000)
            return
        }
        let ready = poll(&fds, nfds_t(fds.count), ms)
        guard ready > 0 else { return }  // timed out or interrupted: the caller re-checks its deadline
        for pfd in fds where pfd.revents != 0 {
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { read(pfd.fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            let isStdout = pfd.fd == stdoutPipe?.fileHandleForReading.fileDescriptor
            if n <= 0 {
                if isStdout { s.atEnd = true } else { s.stderrAtEnd = true }
            } else if isStdout {
                s.pending += chunk[0..<n]
                s.stdoutSoFar += chunk[0..<n]
            } else {
                s.stderrSoFar += chunk[0..<n]
            }
        }
    }
}

/// A fresh directory under the system's temporary directory, named `sealedpush-<label>-<UUID>` (removed by
/// the caller, or left for the OS).
public func makeScratchDirectory(_ label: String = "test") throws -> URL {
    TestLogging.quiet()
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("sealedpush-\(label)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
