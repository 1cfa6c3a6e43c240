public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A long-running child process (a server) whose standard output is read line by line.
public final class ServerChild {
    /// The process.
    public let process = Process()
    private let pipe = Pipe()

    /// Starts `executable` with `arguments` in `directory`; its standard error goes to `stderr` (default: discarded).
    public init(_ executable: URL, _ arguments: [String], in directory: URL, stderr: URL? = nil) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardOutput = pipe
        if let stderr {
            _ = FileManager.default.createFile(atPath: stderr.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: stderr)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// The first line of output (waits up to 30 s).
    public func firstLine() -> String? { nextLine() }

    /// The next line of output, or `nil` after `timeout` seconds or at the end of output.
    public func nextLine(timeout: TimeInterval = 30) -> String? {
        let fd = pipe.fileHandleForReading.fileDescriptor
        var bytes: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 200) >= 0 else { return nil }
            if pfd.revents == 0 { continue }
            var byte: UInt8 = 0
            guard read(fd, &byte, 1) == 1 else { return nil }
            if byte == 0x0a { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return nil
    }

    /// SIGKILL: a child of the test runner may inherit SIGTERM blocked (seen with Python), so terminate() would hang.
    public func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// Runs `executable` with `arguments` in `directory` to completion (killed after `timeout` seconds);
/// returns its exit status, standard output and standard error. Output goes through files, so a child
/// that writes a lot never blocks on a full pipe.
@discardableResult
public func runChild(_ executable: URL, _ arguments: [String], in directory: URL,
                     timeout: TimeInterval = 120) throws -> (status: Int32, out: String, err: String) {
    let out = directory.appendingPathComponent(".out-\(UUID().uuidString)"), err = directory.appendingPathComponent(".err-\(UUID().uuidString)")
    _ = FileManager.default.createFile(atPath: out.path, contents: nil)
    _ = FileManager.default.createFile(atPath: err.path, contents: nil)
    let outHandle = try FileHandle(forWritingTo: out), errHandle = try FileHandle(forWritingTo: err)
    defer {
        try? outHandle.close()
        try? errHandle.close()
        try? FileManager.default.removeItem(at: out)
        try? FileManager.default.removeItem(at: err)
    }
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.currentDirectoryURL = directory
    process.standardOutput = outHandle
    process.standardError = errHandle
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
    return (process.terminationStatus, try String(contentsOf: out, encoding: .utf8), try String(contentsOf: err, encoding: .utf8))
}

/// Runs the built `sealedpush` (`ProjectPaths.sealedpushBinary`) in `directory`; see `runChild`.
@discardableResult
public func sealedpush(_ arguments: [String], in directory: URL, timeout: TimeInterval = 120) throws -> (status: Int32, out: String, err: String) {
    try runChild(ProjectPaths.sealedpushBinary, arguments, in: directory, timeout: timeout)
}

/// Runs the built `sealedpush-server` (`ProjectPaths.sealedpushServerBinary`) in `directory`; see `runChild`.
@discardableResult
public func sealedpushServer(_ arguments: [String], in directory: URL, timeout: TimeInterval = 120) throws -> (status: Int32, out: String, err: String) {
    try runChild(ProjectPaths.sealedpushServerBinary, arguments, in: directory, timeout: timeout)
}
