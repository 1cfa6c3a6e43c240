import Foundation
import SealedPushTestSupport

/// What a finished `sealedpush` run produced.
struct CLIResult: Sendable {
    /// The exit status (or the signal number when it was killed by one).
    let status: Int32
    /// Whether the process exited normally (not by a signal).
    let exitedNormally: Bool
    /// Everything written to standard output.
    let stdout: [UInt8]
    /// Everything written to standard error.
    let stderrBytes: [UInt8]

    /// Standard output as text.
    var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    /// Standard error as text.
    var stderr: String { String(decoding: stderrBytes, as: UTF8.self) }
    /// Standard output split into lines (no empty trailing line).
    var stdoutLines: [String] { stdoutText.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty } }
}

/// Runs the built `sealedpush` binary (or any executable) as a child process.
///
/// Output goes to temporary files rather than pipes, so a child that writes a lot can never
/// deadlock against a parent that has not started reading yet.
enum CLIRunner {
    /// The binary under test: `ProjectPaths.sealedpushBinary` ($SEALEDPUSH_BIN, else beside the test bundle).
    static var binary: URL { ProjectPaths.sealedpushBinary }
    /// `sealedpush-server`: `ProjectPaths.sealedpushServerBinary`.
    static var serverBinary: URL { ProjectPaths.sealedpushServerBinary }

    /// A fresh temporary directory (removed by the caller, or left for the OS).
    static func temporaryDirectory(_ label: String = "cli") throws -> URL {
        TestLogging.quiet()
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("sealedpush-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Runs `executable` (default: `sealedpush`) with `arguments`, feeding `stdin` when given (else an
    /// empty standard input), with extra `environment` variables over the current ones, in
    /// `directory` when given; waits up to `timeout` seconds, then kills it and throws.
    static func run(_ arguments: [String], stdin: [UInt8]? = nil, environment: [String: String] = [:],
                    directory: URL? = nil, executable: URL? = nil, timeout: TimeInterval = 120) throws -> CLIResult {
        let exe = executable ?? binary
        guard FileManager.default.isExecutableFile(atPath: exe.path) else { throw CLIRunnerError.missingBinary(exe.path) }
        let scratch = try temporaryDirectory("run")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let outURL = scratch.appendingPathComponent("stdout"), errURL = scratch.appendingPathComponent("stderr")
        let inURL = scratch.appendingPathComponent("stdin")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: inURL.path, contents: Data(stdin ?? []))
        let outHandle = try FileHandle(forWritingTo: outURL), errHandle = try FileHandle(forWritingTo: errURL)
        let inHandle = try FileHandle(forReadingFrom: inURL)
        defer { try? outHandle.close(); try? errHandle.close(); try? inHandle.close() }

        let process = Process()
        process.executableURL = exe
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        if let directory { process.currentDirectoryURL = directory }
        process.standardInput = inHandle
        process.standardOutput = outHandle
        process.standardError = errHandle
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                process.terminate()
                process.waitUntilExit()
                throw CLIRunnerError.timedOut(arguments: arguments, seconds: timeout)
            }
            Thread.sleep(forTimeInterval: 0.005)
        }
        process.waitUntilExit()
        return CLIResult(status: process.terminationStatus, exitedNormally: process.terminationReason == .exit,
                         stdout: [UInt8](try Data(contentsOf: outURL)), stderrBytes: [UInt8](try Data(contentsOf: errURL)))
    }
}

/// Why a child process could not be run to completion.
enum CLIRunnerError: Error, CustomStringConvertible {
    case missingBinary(String)
    case timedOut(arguments: [String], seconds: TimeInterval)

    var description: String {
        switch self {
        case let .missingBinary(path):
            return "no executable at \(path); build it first (swift build --build-tests) or set SEALEDPUSH_BIN"
        case let .timedOut(arguments, seconds):
            return "sealedpush \(arguments.joined(separator: " ")) did not finish within \(Int(seconds)) s and was killed"
        }
    }
}
