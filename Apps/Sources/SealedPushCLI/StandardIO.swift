import SystemPackage
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The CLI's standard streams and input files, over swift-system's file descriptors rather than
/// Foundation's `FileHandle` (the CLI imports only FoundationEssentials: full Foundation's start-up
/// work — CoreFoundation, ICU — cost `device push` about a megabyte of resident memory).
package enum StandardIO {
    /// Writes `bytes` to standard output (a closed or full stream is not this command's error to report).
    package static func writeOutput(_ bytes: [UInt8]) {
        _ = try? FileDescriptor.standardOutput.writeAll(bytes)
    }

    /// Writes `text` to standard error.
    package static func writeError(_ text: String) {
        _ = try? FileDescriptor.standardError.writeAll(Array(text.utf8))
    }

    /// Whether standard output is a terminal.
    package static var outputIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// Whether standard error is a terminal (progress lines go there only then).
    package static var errorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
}

/// A file, or standard input, read in chunks.
struct InputFile {
    private let descriptor: FileDescriptor
    private let owned: Bool

    /// Standard input.
    static var standardInput: InputFile { InputFile(descriptor: .standardInput, owned: false) }

    /// Opens `path` for reading; throws `CLIError` naming `what` and the path.
    static func open(_ path: String, what: String) throws -> InputFile {
        do {
            return InputFile(descriptor: try FileDescriptor.open(FilePath(path), .readOnly, options: [.closeOnExec]), owned: true)
        } catch {
            throw CLIError("\(what) \(path) cannot be read (\(error)); check its permissions")
        }
    }

    /// Up to `count` bytes; empty at the end of the input.
    func read(upToCount count: Int) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        let n: Int
        do { n = try buffer.withUnsafeMutableBytes { try descriptor.read(into: $0) } } catch {
            throw CLIError("reading the input failed (\(error))")
        }
        buffer.removeLast(count - n)
        return buffer
    }

    /// Closes the file (standard input stays open).
    func close() {
        if owned { try? descriptor.close() }
    }
}

extension InputFile {
    /// A JSONL batch (`--batch FILE`, or - for standard input), refused with a clear message when the path
    /// does not exist or is a directory.
    static func openBatch(_ path: String) throws -> InputFile {
        if path == "-" { return InputFile.standardInput }
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw CLIError("the batch file \(path) does not exist; check the path")
        }
        guard !isDirectory else { throw CLIError("the batch file \(path) is a directory; pass a file") }
        return try InputFile.open(path, what: "the batch file")
    }
}
