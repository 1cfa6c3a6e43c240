import Foundation
import Testing
import SealedPushTestSupport

/// The modules an iOS notification service extension links must build for the platforms
/// `Package.swift` declares (iOS 18, macOS 15). Linux does not enforce availability, so this suite
/// reads the object code those modules compiled to, demangles every Swift symbol it defines or
/// references, and looks each up in `post-platform-api.txt`: the declarations the toolchain's own
/// interfaces (Swift, _Concurrency, Synchronization) mark newer than those platforms, extracted by
/// `extract_post_platform_api.py` (run it again after a toolchain update).
@Suite("Platform availability of the extension's modules", .timeLimit(.minutes(10)))
struct PlatformAvailabilityTests {
    static let extensionModules = ["SealedPushCrypto", "SealedPushWire", "SealedPushReceiver", "SealedPushKeyring"]

    /// The checked-in list: `Module.Container.member` per line.
    static func newerDeclarations() throws -> Set<String> {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("post-platform-api.txt")
        let text = try String(contentsOf: url, encoding: .utf8)
        return Set(text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") && !$0.isEmpty })
    }

    /// The declaration a demangled symbol names, as `Module.Container.member` (accessors, signatures,
    /// generic arguments and "(extension in M):" qualifiers removed), or `nil` for runtime helpers.
    static func declarationPath(ofDemangled symbol: String) -> String? {
        var s = symbol
        for prefix in ["type metadata accessor for ", "nominal type descriptor for ", "type metadata for ",
                       "protocol conformance descriptor for ", "protocol witness table for ", "value witness table for ",
                       "outlined copy of ", "outlined destroy of ", "outlined retain of ", "outlined release of ",
                       "outlined init with take of ", "outlined init with copy of ", "outlined assign with take of ",
                       "outlined assign with copy of ", "type metadata completion function for ", "metaclass for ",
                       "merged ", "dispatch thunk of ", "method descriptor for ", "property descriptor for ",
                       "associated type descriptor for ", "protocol requirements base descriptor for ",
                       "reabstraction thunk helper from ", "partial apply forwarder for ", "lazy protocol witness table accessor for type ",
                       "protocol descriptor for ", "generic specialization <", "function signature specialization <"] where s.hasPrefix(prefix) {
            s.removeFirst(prefix.count)
        }
        // Specializations: "generic specialization <…> of X" → X.
        if let of = s.range(of: "> of ") { s = String(s[of.upperBound...]) }
        s = s.replacingOccurrences(of: #"\(extension in [A-Za-z_]+\):"#, with: "", options: .regularExpression)
        // Generic arguments and signatures end the path; a parameter list right after the name adds
        // its argument labels, as the list writes them: `init(copying:)`, `index(_:offsetBy:)`.
        var depth = 0
        var path = ""
        var labels: String?
        var index = s.startIndex
        while index < s.endIndex {
            let ch = s[index]
            if ch == "<" { depth += 1 } else if ch == ">" { depth = max(0, depth - 1) } else if depth == 0 {
                if ch == "(" {
                    labels = argumentLabels(String(s[index...]))
                    break
                }
                if ch == " " || ch == ":" { break }
                path.append(ch)
            }
            index = s.index(after: index)
        }
        for accessor in [".getter", ".setter", ".modify", ".read", ".unsafeAddressor", ".unsafeMutableAddressor", ".modify2", ".read2"]
        where path.hasSuffix(accessor) {
            path.removeLast(accessor.count)
        }
        if let labels, !path.hasSuffix(".subscript") { path += labels }
        return path.isEmpty ? nil : path
    }

    /// `(label:label:)` for a demangled parameter list such as `(_: Swift.Int, offsetBy: Swift.Int) -> …`;
    /// an unlabeled parameter is `_`.
    static func argumentLabels(_ text: String) -> String {
        var depth = 0
        var params: [String] = []
        var current = ""
        for ch in text {
            if ch == "(" || ch == "[" || ch == "<" {
                depth += 1
                if depth == 1 { continue }
            } else if ch == ")" || ch == "]" || ch == ">" {
                depth -= 1
                if depth == 0 { params.append(current); break }
            }
            if ch == ",", depth == 1 { params.append(current); current = ""; continue }
            current.append(ch)
        }
        let labels = params.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.map { param -> String in
            let head = param.prefix { $0 != ":" && $0 != " " && $0 != "(" && $0 != "<" && $0 != "." }
            return param.dropFirst(head.count).hasPrefix(": ") ? String(head) : "_"
        }
        return "(" + labels.map { $0 + ":" }.joined() + ")"
    }

    /// Every newer declaration `path` is or lies inside (a member of a newer type counts).
    static func violations(_ path: String, _ newer: Set<String>) -> [String] {
        var found: [String] = []
        let name = path.prefix { $0 != "(" }
        var prefix = ""
        for part in name.split(separator: ".") {
            prefix = prefix.isEmpty ? String(part) : prefix + "." + part
            if newer.contains(prefix) { found.append(prefix) }
        }
        if path.count > name.count, newer.contains(path) { found.append(path) }
        return found
    }

    @Test("the symbol reader maps demangled names to declarations")
    func demangledPaths() throws {
        let newer = try Self.newerDeclarations()
        #expect(newer.contains("Swift.Array.span") && newer.contains("Swift.UTF8Span"))
        #expect(!newer.contains("Swift.UnsafeBufferPointer.span"), "back-deployed to iOS 12.2")
        #expect(Self.declarationPath(ofDemangled: "(extension in Swift):Swift.Array.span.getter : Swift.Span<A>") == "Swift.Array.span")
        #expect(Self.declarationPath(ofDemangled: "Swift.UTF8Span.init(validating: Swift.Span<Swift.UInt8>) throws(Swift.UTF8.ValidationError) -> Swift.UTF8Span")
                == "Swift.UTF8Span.init(validating:)")
        #expect(Self.declarationPath(ofDemangled: "Swift.String.init(copying: Swift.UTF8Span) -> Swift.String") == "Swift.String.init(copying:)")
        #expect(Self.violations("Swift.String.init(copying:)", newer) == ["Swift.String.init(copying:)"])
        #expect(Self.violations("Swift.String.init(repeating:count:)", newer).isEmpty)
        #expect(Self.declarationPath(ofDemangled: "Swift.String.UTF16View.index(_: Swift.String.Index, offsetBy: Swift.Int) -> Swift.String.Index")
                == "Swift.String.UTF16View.index(_:offsetBy:)")
        #expect(Self.declarationPath(ofDemangled: "type metadata accessor for Swift.UTF8Span") == "Swift.UTF8Span")
        #expect(Self.violations("Swift.UTF8Span.init(validating:)", newer).contains("Swift.UTF8Span"))
        #expect(Self.violations("Swift.UnsafeBufferPointer.span", newer).isEmpty)
    }

    @Test("Crypto, Wire, Receiver and Keyring use nothing newer than iOS 18 / macOS 15", arguments: PlatformAvailabilityTests.extensionModules)
    func moduleUsesOnlyDeclaredPlatforms(module: String) throws {
        let newer = try Self.newerDeclarations()
        let objects = try Self.objectFiles(of: module)
        try #require(!objects.isEmpty, "no object files for \(module): build with `swift build --build-tests` first")
        var found: [String: Set<String>] = [:]
        for symbol in try Self.demangledSymbols(objects) {
            guard let path = Self.declarationPath(ofDemangled: symbol) else { continue }
            for v in Self.violations(path, newer) { found[v, default: []].insert(symbol) }
        }
        #expect(found.isEmpty, "\(module) uses declarations newer than its platforms: \(found.keys.sorted().joined(separator: ", "))")
    }

    /// The object files SwiftPM compiled `module` to, beside the running test bundle.
    static func objectFiles(of module: String) throws -> [String] {
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
        // The test bundle lives in the build directory, e.g. .build/x86_64-unknown-linux-gnu/debug.
        for _ in 0..<3 where !FileManager.default.fileExists(atPath: dir.appendingPathComponent("\(module).build").path) {
            dir = dir.deletingLastPathComponent()
        }
        let moduleDir = dir.appendingPathComponent("\(module).build")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: moduleDir.path)) ?? []
        return names.filter { $0.hasSuffix(".o") }.map { moduleDir.appendingPathComponent($0).path }
    }

    /// Every Swift symbol the object files define or reference, demangled.
    static func demangledSymbols(_ objects: [String]) throws -> [String] {
        let nm = try run("/usr/bin/env", ["nm", "--format=just-symbols"] + objects)
        let swiftSymbols = nm.split(separator: "\n").filter { $0.hasPrefix("$s") }.map(String.init)
        let demangled = try run("/usr/bin/env", ["swift-demangle"], input: swiftSymbols.joined(separator: "\n"))
        return demangled.split(separator: "\n").map(String.init)
    }

    static func run(_ tool: String, _ arguments: [String], input: String? = nil) throws -> String {
        let r = try ChildProcess.run(URL(fileURLWithPath: tool), arguments, stdin: input.map { Array($0.utf8) }, timeout: 300)
        try #require(r.status == 0, "\(arguments.first ?? tool) failed: \(r.stderr)")
        return r.stdoutText
    }
}
