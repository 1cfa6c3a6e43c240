#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SealedPushDevice
import SealedPushReceiver

/// Renders a delivered notification the way a person sees it: a banner-like box and an outcome line.
enum Banner {
    /// Plain text, or ANSI colour on a terminal.
    struct Style {
        let color: Bool
        static func detect() -> Style { Style(color: StandardIO.outputIsTerminal && ProcessInfo.processInfo.environment["NO_COLOR"] == nil) }
        static let plain = Style(color: false)

        func paint(_ text: String, _ code: String) -> String { color ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
        func bold(_ t: String) -> String { paint(t, "1") }
        func dim(_ t: String) -> String { paint(t, "2") }
        func green(_ t: String) -> String { paint(t, "32") }
        func yellow(_ t: String) -> String { paint(t, "33") }
        func red(_ t: String) -> String { paint(t, "31") }
        func cyan(_ t: String) -> String { paint(t, "36") }
    }

    static let width = 40

    /// The box lines for a notification's title, subtitle and body (text wrapped to the box).
    /// How many characters `text` shows, ANSI colour sequences (`ESC [ … m`) not counted.
    static func visibleWidth(_ text: String) -> Int {
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
        return String(visible).count
    }

    static func box(title: String, subtitle: String, body: String, style: Style) -> [String] {
        var lines = ["┌" + String(repeating: "─", count: width + 2) + "┐"]
        func add(_ text: String, _ paint: (String) -> String) {
            for line in wrap(text) {
                let pad = String(repeating: " ", count: max(0, width - line.count))
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

    static func wrap(_ text: String) -> [String] {
        var out: [String] = []
        for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = ""
            for word in paragraph.split(separator: " ", omittingEmptySubsequences: false) {
                var word = String(word)
                while word.count > width { out.append(line.isEmpty ? String(word.prefix(width)) : line); line = ""; word = String(word.dropFirst(width)) }
                if line.isEmpty { line = word } else if line.count + 1 + word.count <= width { line += " " + word } else { out.append(line); line = word }
            }
            out.append(line)
        }
        return out
    }

    /// The outcome line: `decrypted`, or `fallback (reason: keychainLocked)`.
    static func outcomeLine(_ result: DeliveryResult, style: Style) -> String {
        let name = result.outcome.rawValue
        let painted: String
        switch result.outcome {
        case .decrypted: painted = style.green(name)
        case .fallback, .timeout: painted = style.yellow(name)
        case .rejected: painted = style.red(name)
        case .original, .suppressed: painted = style.cyan(name)
        }
        return "outcome: " + painted + (result.reason.map { "  reason: \($0.rawValue)" } ?? "")
    }

    /// The whole report for one delivery.
    static func render(_ result: DeliveryResult, style: Style) -> String {
        var lines: [String] = []
        if let n = result.notification {
            lines += box(title: n.title, subtitle: n.subtitle, body: n.body, style: style)
        } else {
            lines.append(style.dim("(no notification shown)"))
        }
        lines.append(outcomeLine(result, style: style))
        lines += attachmentLines(result, style: style)
        return lines.joined(separator: "\n")
    }

    /// One line per attachment of an opened message: type, size and file, or why it was not attached.
    static func attachmentLines(_ result: DeliveryResult, style: Style) -> [String] {
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
