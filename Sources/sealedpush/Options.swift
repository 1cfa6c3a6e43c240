import ArgumentParser
import Foundation

/// `--keychain DIR`, shared by every command that touches a store.
struct KeychainOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The keychain directory (else $SEALEDPUSH_KEYCHAIN, else ./keys).", valueName: "DIR"))
    var keychain: String?

    init() {}

    /// Options naming `directory` explicitly.
    init(directory: String) { keychain = directory }

    /// An explicit but empty `--keychain ""` (an unset shell variable, say) is refused rather than
    /// silently falling back to $SEALEDPUSH_KEYCHAIN or ./keys.
    func validate() throws {
        if let keychain, keychain.isEmpty {
            throw ValidationError("--keychain needs a directory; it was given an empty path (omit it to use $SEALEDPUSH_KEYCHAIN or ./keys).")
        }
    }

    /// The resolved store directory.
    var directory: URL {
        if let keychain, !keychain.isEmpty { return URL(fileURLWithPath: keychain) }
        if let env = ProcessInfo.processInfo.environment["SEALEDPUSH_KEYCHAIN"], !env.isEmpty { return URL(fileURLWithPath: env) }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("keys")
    }
}

/// `--json`, shared by commands that can print machine-readable output.
struct JSONOutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print JSON instead of a table.")
    var json = false
}

/// A duration written like `500ms`, `30s`, `15m`, `2h` or `7d`.
struct DurationArgument: ExpressibleByArgument, Sendable, Equatable, CustomStringConvertible {
    /// The duration in milliseconds.
    let milliseconds: Int64

    init(milliseconds: Int64) { self.milliseconds = milliseconds }

    init?(argument: String) {
        guard let parsed = Self.parse(argument) else { return nil }
        self = parsed
    }

    static func parse(_ text: String) -> DurationArgument? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            guard !number.isEmpty, number.allSatisfy(\.isASCII), number.allSatisfy(\.isNumber), let value = Int64(number) else { return nil }
            let (ms, overflow) = value.multipliedReportingOverflow(by: factor)
            guard !overflow, ms <= 100 * 365 * 86_400_000 else { return nil }
            return DurationArgument(milliseconds: ms)
        }
        return nil
    }

    static var defaultValueDescription: String { "a duration like 500ms, 30s, 15m, 2h or 7d" }

    /// Whole seconds, rounded down.
    var seconds: Int64 { milliseconds / 1000 }
    /// As a Swift `Duration`.
    var duration: Duration { .milliseconds(milliseconds) }

    var description: String {
        if milliseconds % 86_400_000 == 0 { return "\(milliseconds / 86_400_000)d" }
        if milliseconds % 3_600_000 == 0 { return "\(milliseconds / 3_600_000)h" }
        if milliseconds % 60_000 == 0 { return "\(milliseconds / 60_000)m" }
        if milliseconds % 1000 == 0 { return "\(milliseconds / 1000)s" }
        return "\(milliseconds)ms"
    }
}

/// A runtime failure of a command: printed to stderr as `Error: …`, exit status 1.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Writes text to standard error.
func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// Reads a whole file, or standard input for `-`, refusing directories and inputs over `limit` bytes.
func readInput(_ path: String, limit: Int, what: String) throws -> [UInt8] {
    if path == "-" {
        var out: [UInt8] = []
        while let chunk = try FileHandle.standardInput.read(upToCount: 65536), !chunk.isEmpty {
            out.append(contentsOf: chunk)
            if out.count > limit { throw CLIError("\(what) on standard input is over \(limit) bytes; pass a smaller input") }
        }
        return out
    }
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
        throw CLIError("\(what) \(path) does not exist; check the path")
    }
    guard !isDirectory.boolValue else { throw CLIError("\(what) \(path) is a directory; pass a file") }
    guard let handle = FileHandle(forReadingAtPath: path) else { throw CLIError("\(what) \(path) cannot be read; check its permissions") }
    defer { try? handle.close() }
    var out: [UInt8] = []
    while let chunk = try handle.read(upToCount: 65536), !chunk.isEmpty {
        out.append(contentsOf: chunk)
        if out.count > limit { throw CLIError("\(what) \(path) is over \(limit) bytes; pass a smaller file") }
    }
    return out
}
