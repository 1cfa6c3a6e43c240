import Foundation
import SealedPushCrypto
import SealedPushTestSupport

// The multi-process keychain tests: `keychain-torture` children, SIGKILLed mid-write or run under lowered
// file-size limits. The few small helpers below repeat SealedPushKeychainTests' (a test target cannot
// import another).

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

    /// Starts the helper with `args`; with `readLines`, its standard output is read line by line while it runs.
    static func start(_ args: [String], readLines: Bool = false) throws -> ChildProcess {
        try ChildProcess(launching: binary, args, readLines: readLines)
    }

    /// Runs the helper to completion (killed, and a thrown error, after `timeout` seconds). Its output goes
    /// through pipes: `fault --file-size-limit` lowers RLIMIT_FSIZE, which would cut output files short too.
    static func run(_ args: [String], timeout: TimeInterval = 120) throws -> ChildProcess.Result {
        try ChildProcess.run(binary, args, timeout: timeout, outputThroughPipes: true)
    }
}
