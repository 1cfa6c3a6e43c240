import Foundation
import Testing
import SealedPushTestSupport

/// The README as a newcomer meets it (issue #15 items 7 and 13), and the demo's box drawing.
@Suite("README quickstart, links, command table; demo box", .serialized, .timeLimit(.minutes(10)))
struct ReadmeQuickstartTests {
    static var readme: String { get throws { try String(contentsOf: ProjectPaths.root.appendingPathComponent("README.md"), encoding: .utf8) } }

    /// The lines of the first ```sh block after `## The CLI`.
    static func quickstart() throws -> [String] {
        let text = try readme
        let section = try #require(text.range(of: "## The CLI"))
        let rest = text[section.upperBound...]
        let open = try #require(rest.range(of: "```sh\n"))
        let close = try #require(rest[open.upperBound...].range(of: "```"))
        return rest[open.upperBound..<close.lowerBound].split(separator: "\n").map(String.init)
            .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#") && !$0.isEmpty }
    }

    @Test("the quickstart, run line by line in a fresh directory, shows nothing alarming")
    func quickstartRunsClean() throws {
        let dir = try makeScratchDirectory("quickstart")
        defer { try? FileManager.default.removeItem(at: dir) }
        let lines = try Self.quickstart()
        #expect(lines.count >= 7)
        let path = ProjectPaths.sealedpushBinary.deletingLastPathComponent().path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        var outcomes: [String] = []
        for line in lines {
            let r = try ChildProcess.run(URL(fileURLWithPath: "/bin/sh"), ["-c", line], environment: ["PATH": path, "SEALEDPUSH_LOG_LEVEL": ""],
                                         in: dir)
            #expect(r.status == 0, Comment(rawValue: "\(line)\n\(r.stderr)"))
            let shown = r.stdoutText + r.stderr
            for alarming in ["replayed", "Error", "error", "fallback", "warning", "untrusted"] {
                #expect(!shown.contains(alarming), Comment(rawValue: "\(line) printed \(alarming):\n\(shown)"))
            }
            if line.contains("device push") { outcomes.append(shown) }
        }
        #expect(outcomes.count == 2)
        #expect(outcomes.first?.contains("outcome: decrypted") == true)
        #expect(outcomes.last?.contains(#""outcome":"decrypted""#) == true)
        // What the line under the block explains: the same payload twice is replayed.
        let again = try ChildProcess.sealedpush(["device", "push", "--keychain", dir.appendingPathComponent("dev").path, "--json",
                                       dir.appendingPathComponent("payload.json").path])
        #expect(again.stdoutText.contains(#""reason":"replayed""#))
        #expect(try Self.readme.contains("answers `fallback` with reason `replayed`"))
    }

    @Test("every README link has a target, and every relative target exists")
    func links() throws {
        var inFence = false
        var problems: [String] = []
        for line in try Self.readme.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inFence.toggle(); continue }
            if inFence { continue }
            // Code spans are not links.
            let prose = line.replacing(/`[^`]*`/, with: "")
            for match in prose.matches(of: /\[([^\]]*)\](\(([^)]*)\))?/) {
                guard let target = match.output.3 else { problems.append("no target: \(match.output.0)"); continue }
                let t = String(target)
                if t.hasPrefix("http") || t.hasPrefix("#") { continue }
                let resolved = ProjectPaths.root.appendingPathComponent(t).standardized.path
                if !FileManager.default.fileExists(atPath: resolved) { problems.append("missing: \(t)") }
            }
        }
        #expect(problems.isEmpty, Comment(rawValue: problems.joined(separator: "\n")))
    }

    @Test("the README's device push row names every option device push --help lists")
    func commandTableIsComplete() throws {
        let help = try ChildProcess.sealedpush(["device", "push", "--help"], environment: ["COLUMNS": "300"]).stdoutText
        let section = try #require(help.range(of: "OPTIONS:"))
        let declared = help[section.upperBound...].split(separator: "\n").compactMap { line in
            line.firstMatch(of: /^\s+(?:-[a-z], )?(--[a-z][a-z-]+)/).map { String($0.output.1) }
        }
        let options = Set(declared).subtracting(["--help", "--keychain", "--version"])
        #expect(options.contains("--expiry-grace"))
        let row = try #require(try Self.readme.split(separator: "\n").first { $0.hasPrefix("| `device push") })
        let missing = options.filter { !row.contains($0) }.sorted()
        #expect(missing.isEmpty, Comment(rawValue: "README's device push row lacks \(missing)"))
    }

    /// The columns a terminal gives a character: emoji 2, everything the demo prints otherwise 1.
    static func columns(_ text: Substring) -> Int {
        text.reduce(0) { $0 + ($1.unicodeScalars.first!.properties.isEmojiPresentation ? 2 : 1) }
    }

    @Test("the demo's boxes are aligned by display width (the 🎉 line too)")
    func demoBoxesAlign() throws {
        let r = try ChildProcess.sealedpushServer(["demo"])
        #expect(r.status == 0, Comment(rawValue: r.stderr))
        let boxLines = r.stdoutText.split(separator: "\n").filter { $0.contains("│") || $0.contains("┌") || $0.contains("└") }
        #expect(boxLines.contains { $0.contains("🎉") })
        // From the box's left edge to the end of the line: every line of every box is as wide as its border.
        let widths = Set(boxLines.map { line -> Int in
            let start = line.firstIndex { $0 == "│" || $0 == "┌" || $0 == "└" }!
            return Self.columns(line[start...])
        })
        #expect(widths.count == 1, Comment(rawValue: "box lines of different widths: \(widths)\n" + boxLines.joined(separator: "\n")))
    }
}
