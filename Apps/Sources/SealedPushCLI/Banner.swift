#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
package import SealedPushDevice
package import SealedPushReceiver

/// Renders a delivered notification the way a person sees it: a banner-like box and an outcome line.
package enum Banner {
    /// Plain text, or ANSI colour on a terminal.
    package struct Style {
        let color: Bool
        package static func detect() -> Style { Style(color: StandardIO.outputIsTerminal && ProcessInfo.processInfo.environment["NO_COLOR"] == nil) }
        package static let plain = Style(color: false)

        package func paint(_ text: String, _ code: String) -> String { color ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
        package func bold(_ t: String) -> String { paint(t, "1") }
        package func dim(_ t: String) -> String { paint(t, "2") }
        package func green(_ t: String) -> String { paint(t, "32") }
        package func yellow(_ t: String) -> String { paint(t, "33") }
        package func red(_ t: String) -> String { paint(t, "31") }
        package func cyan(_ t: String) -> String { paint(t, "36") }
    }

    package static let width = 40

    /// How many terminal columns `text` takes, ANSI colour sequences (`ESC [ … m`) not counted: an
    /// emoji or an East Asian wide character takes two, a combining mark or format character none.
    package static func visibleWidth(_ text: String) -> Int {
        var visible = String.UnicodeScalarView()
        var inEscape = false
        for scalar in text.unicodeScalars {
            if inEscape {
                if scalar == "m" { inEscape = false }
            } else if scalar == "\u{1B}" {
                inEscape = true
            } else {
                visible.append(scalar)
            }
        }
        return String(visible).reduce(0) { $0 + displayWidth($1) }
    }

    /// The terminal columns of one character (grapheme cluster), as terminals following Unicode's East
    /// Asian Width and emoji presentation draw it.
    package static func displayWidth(_ character: Character) -> Int {
        let scalars = character.unicodeScalars
        guard let first = scalars.first else { return 0 }
        let p = first.properties
        if p.isEmojiPresentation || (p.isEmoji && scalars.contains("\u{FE0F}")) { return 2 }
        switch p.generalCategory {
        case .nonspacingMark, .enclosingMark, .format, .control: return 0
        default: break
        }
        switch first.value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
             0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x3FFFD:
            return 2
        default:
            return 1
        }
    }

    /// The box lines for a notification's title, subtitle and body (text wrapped to the box).
    package static func box(title: String, subtitle: String, body: String, style: Style) -> [String] {
        var lines = ["┌" + String(repeating: "─", count: width + 2) + "┐"]
        func add(_ text: String, _ paint: (String) -> String) {
            for line in wrap(text) {
                let pad = String(repeating: " ", count: max(0, width - visibleWidth(line)))
                lines.append("│ " + paint(line) + pad + " │")
            }
        }
        if !title.isEmpty { add(title, style.bold) }
        if !subtitle.isEmpty { add(subtitle, { $0 }) }
        if !body.isEmpty { add(body, { $0 }) }
        if title.isEmpty && subtitle.isEmpty && body.isEmpty { add("(nothing visible)", style.dim) }
        lines.append("└" + String(repeating: "─", count: width + 2) + "┘")
        return lines
    }

    package static func wrap(_ text: String) -> [String] {
        var out: [String] = []
        for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = ""
            for word in paragraph.split(separator: " ", omittingEmptySubsequences: false) {
                var word = String(word)
                while visibleWidth(word) > width {
                    if !line.isEmpty { out.append(line); line = "" }
                    // The longest prefix that fits the box.
                    var cut = word.startIndex, used = 0
                    while cut < word.endIndex, used + displayWidth(word[cut]) <= width { used += displayWidth(word[cut]); cut = word.index(after: cut) }
                    out.append(String(word[..<cut]))
                    word = String(word[cut...])
                }
                if line.isEmpty { line = word } else if visibleWidth(line) + 1 + visibleWidth(word) <= width { line += " " + word } else { out.append(line); line = word }
            }
            out.append(line)
        }
        return out
    }

    /// The outcome line: `decrypted`, or `fallback (reason: keychainLocked)`.
    package static func outcomeLine(_ result: DeliveryResult, style: Style) -> String {
        let name = result.outcome.rawValue
        let painted: String
        switch result.outcome {
        case .decrypted: painted = style.green(name)
        case .fallback, .timeout: painted = style.yellow(name)
        case .rejected: painted = style.red(name)
        case .original, .suppressed, .held: painted = style.cyan(name)
        }
        return "outcome: " + painted + (result.reason.map { "  reason: \($0.rawValue)" } ?? "")
    }

    /// The whole report for one delivery.
    package static func render(_ result: DeliveryResult, style: Style) -> String {
        var lines: [String] = []
        if let n = result.notification {
            lines += box(title: n.title, subtitle: n.subtitle, body: n.body, style: style)
        } else {
            lines.append(style.dim("(no notification shown)"))
        }
        lines.append(outcomeLine(result, style: style))
        if result.outcome == .held, let requestID = result.requestID {
            lines.append(style.dim("press and hold: sealedpush device expand \(requestID)"))
        }
        lines += attachmentLines(result, style: style)
        return lines.joined(separator: "\n")
    }

    /// The outcome line of a press and hold: `revealed`, `locked`, or `fallback  reason: CODE`.
    package static func outcomeLine(_ view: RevealView, style: Style) -> String {
        let painted: String
        switch view.outcome {
        case .revealed: painted = style.green(view.outcome.name)
        case .locked: painted = style.cyan(view.outcome.name)
        case .fallback: painted = style.yellow(view.outcome.name)
        }
        return "outcome: " + painted + (view.outcome.reason.map { "  reason: \($0.rawValue)" } ?? "")
    }

    /// What the content extension's view shows (`device expand`): the box, the outcome line and one line per
    /// attachment (identifier, type and size; the files are gone once the view has ended).
    package static func render(_ view: RevealView, style: Style) -> String {
        var lines = box(title: view.title, subtitle: view.subtitle, body: view.body, style: style)
        lines.append(outcomeLine(view, style: style))
        for a in view.attachments {
            lines.append("attachment \(a.identifier): \(a.type ?? "?"), \(a.size.map(String.init) ?? "?") bytes")
        }
        for f in view.attachmentFailures ?? [] {
            lines.append("attachment \(f.identifier): " + style.yellow("not attached") + " (reason: \(f.reason.rawValue))")
        }
        return lines.joined(separator: "\n")
    }

    /// One line per attachment of an opened message: type, size and file, or why it was not attached.
    package static func attachmentLines(_ result: DeliveryResult, style: Style) -> [String] {
        guard let failures = result.attachmentFailures else { return [] }
        var lines: [String] = []
        for a in result.notification?.attachments ?? [] {
            lines.append("attachment \(a.identifier): \(a.type ?? "?"), \(a.size.map(String.init) ?? "?") bytes, \(a.url)")
        }
        for f in failures {
            lines.append("attachment \(f.identifier): " + style.yellow("not attached") + " (reason: \(f.reason.rawValue))")
        }
        return lines
    }
}
