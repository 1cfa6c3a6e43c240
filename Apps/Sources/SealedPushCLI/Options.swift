import ArgumentParser
import SealedPushWire
#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif

/// `--keychain DIR`, shared by every command that touches a store.
package struct KeychainOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The keychain directory (else $SEALEDPUSH_KEYCHAIN, else ./keys).", valueName: "DIR"))
    var keychain: String?

    package init() {}

    /// Options naming `directory` explicitly.
    package init(directory: String) { keychain = directory }

    /// An explicit but empty `--keychain ""` (an unset shell variable, say) is refused rather than
    /// silently falling back to $SEALEDPUSH_KEYCHAIN or ./keys.
    package func validate() throws {
        if let keychain, keychain.isEmpty {
            throw ValidationError("--keychain needs a directory; it was given an empty path (omit it to use $SEALEDPUSH_KEYCHAIN or ./keys).")
        }
    }

    /// The resolved store directory.
    package var directory: URL {
        if let keychain, !keychain.isEmpty { return URL(fileURLWithPath: keychain) }
        if let env = ProcessInfo.processInfo.environment["SEALEDPUSH_KEYCHAIN"], !env.isEmpty { return URL(fileURLWithPath: env) }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("keys")
    }
}

/// `--json`, shared by commands that can print machine-readable output.
package struct JSONOutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print JSON instead of a table.")
    package var json = false

    package init() {}
}

/// A duration written like `500ms`, `30s`, `15m`, `2h` or `7d`.
package struct DurationArgument: ExpressibleByArgument, Sendable, Equatable, CustomStringConvertible {
    /// The duration in milliseconds.
    package let milliseconds: Int64

    package init(milliseconds: Int64) { self.milliseconds = milliseconds }

    package init?(argument: String) {
        guard let parsed = Self.parse(argument) else { return nil }
        self = parsed
    }

    package static func parse(_ text: String) -> DurationArgument? {
        DurationSyntax.milliseconds(text).map(DurationArgument.init(milliseconds:))
    }

    package static var defaultValueDescription: String { "a duration like \(DurationSyntax.forms)" }

    /// Whole seconds, rounded down.
    package var seconds: Int64 { milliseconds / 1000 }
    /// As a Swift `Duration`.
    package var duration: Duration { .milliseconds(milliseconds) }

    package var description: String { DurationSyntax.format(milliseconds: milliseconds) }
}

/// A runtime failure of a command: printed to stderr as `Error: …`, exit status 1.
package struct CLIError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Writes text to standard error.
package func printError(_ text: String) {
    StandardIO.writeError(text + "\n")
}

/// Reads a whole file, or standard input for `-`, refusing directories and inputs over `limit` bytes.
func readInput(_ path: String, limit: Int, what: String) throws -> [UInt8] {
    if path == "-" {
        var out: [UInt8] = []
        let input = InputFile.standardInput
        while case let chunk = try input.read(upToCount: 65536), !chunk.isEmpty {
            out.append(contentsOf: chunk)
            if out.count > limit { throw CLIError("\(what) on standard input is over \(limit) bytes; pass a smaller input") }
        }
        return out
    }
    var isDirectory = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
        throw CLIError("\(what) \(path) does not exist; check the path")
    }
    guard !isDirectory else { throw CLIError("\(what) \(path) is a directory; pass a file") }
    let handle = try InputFile.open(path, what: what)
    defer { handle.close() }
    var out: [UInt8] = []
    while case let chunk = try handle.read(upToCount: 65536), !chunk.isEmpty {
        out.append(contentsOf: chunk)
        if out.count > limit { throw CLIError("\(what) \(path) is over \(limit) bytes; pass a smaller file") }
    }
    return out
}
