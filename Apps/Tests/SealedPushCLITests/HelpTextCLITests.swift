import Foundation
import Testing
import SealedPushTestSupport

/// Help text is wrapped once, by ArgumentParser (issue #15 item 8): source strings hold no hard line
/// breaks inside a paragraph, so help reads evenly at any terminal width.
@Suite("CLI: help text wrapping", .timeLimit(.minutes(10)))
struct HelpTextCLITests {
    static let commands: [[String]] = [
        [], ["seal"], ["keys"], ["keys", "generate"], ["keys", "add-reveal"], ["keys", "rotate"], ["keys", "list"], ["keys", "export"], ["keys", "retire"],
        ["keys", "destroy"], ["keys", "prune"], ["sender"], ["sender", "rotate"], ["sender", "activate"], ["sender", "export"],
        ["trust"], ["trust", "add"], ["trust", "remove"], ["trust", "require-signature"], ["device"], ["device", "push"], ["device", "subscribe"],
        ["device", "notifications"], ["device", "expand"], ["device", "config"], ["device", "flush"], ["device", "status"], ["device", "fetch"], ["device", "unlock"], ["send"],
    ]
    /// `sealedpush-server`'s commands.
    static let serverCommands: [[String]] = [
        [], ["apns"], ["apns", "serve"], ["apns", "generate-key"], ["webpush"], ["webpush", "serve"], ["webpush", "generate-vapid"], ["media"], ["media", "serve"], ["receipts"], ["receipts", "serve"],
        ["receipts", "stats"], ["gateway"], ["gateway", "run"], ["gateway", "new-api-key"], ["gateway", "probe"], ["demo"],
        ["fcm"], ["fcm", "serve"], ["fcm", "generate-service-account"],
    ]

    /// Line pairs of `help` where the second line's first word would have fitted on the first at `width`:
    /// a break ArgumentParser did not make (its wrapping is greedy), i.e. a hard newline inside a paragraph.
    static func raggedBreaks(_ help: String, width: Int) -> [String] {
        let lines = help.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var found: [String] = []
        func indent(_ s: String) -> Int { s.prefix { $0 == " " }.count }
        for (a, b) in zip(lines, lines.dropFirst()) {
            let textA = a.trimmingCharacters(in: .whitespaces), textB = b.trimmingCharacters(in: .whitespaces)
            // Only prose at the left margin: indented blocks (examples, JSON shapes, tables, option help) are laid out on purpose.
            guard !textA.isEmpty, !textB.isEmpty, indent(a) == 0, indent(b) == 0 else { continue }
            if textA.hasSuffix(":") || textB.hasPrefix("-") || textB.hasPrefix("Example") { continue }
            let firstWord = textB.split(separator: " ").first.map(String.init) ?? textB
            // ArgumentParser wraps a little short of the width; a word that fits with room to spare was broken by hand.
            if a.count + 1 + firstWord.count <= width - 2 { found.append("\(a)\n\(b)") }
        }
        return found
    }

    @Test("no paragraph of any command's help is broken by hand", arguments: [80, 200])
    func helpIsWrappedOnce(width: Int) throws {
        var ragged: [String] = []
        for command in Self.commands {
            let r = try ChildProcess.sealedpush(command + ["--help"], environment: ["COLUMNS": String(width)])
            #expect(r.status == 0, Comment(rawValue: "\(command): \(r.stderr)"))
            ragged += Self.raggedBreaks(r.stdoutText, width: width).map { "sealedpush \(command.joined(separator: " ")):\n\($0)" }
        }
        for command in Self.serverCommands {
            let r = try ChildProcess.sealedpushServer(command + ["--help"], environment: ["COLUMNS": String(width)])
            #expect(r.status == 0, Comment(rawValue: "\(command): \(r.stderr)"))
            ragged += Self.raggedBreaks(r.stdoutText, width: width).map { "sealedpush-server \(command.joined(separator: " ")):\n\($0)" }
        }
        #expect(ragged.isEmpty, Comment(rawValue: ragged.joined(separator: "\n\n")))
    }
}
