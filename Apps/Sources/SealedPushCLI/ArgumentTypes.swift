import ArgumentParser
package import SealedPushAPNs
import SealedPushAPNsCore
package import SealedPushSender
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `HOST:PORT` (`--listen`): an IPv4 address or host name and a port, or an IPv6 address in brackets
/// (`[::1]:2197`); port 0 asks for any free port. Parsed here and nowhere else.
package struct HostPort: ExpressibleByArgument, Sendable, Equatable, CustomStringConvertible {
    /// The host, without brackets.
    package let host: String
    /// The port, 0 to 65535.
    package let port: Int

    package init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    package init?(argument: String) {
        guard let parsed = try? HostPort.parse(argument) else { return nil }
        self = parsed
    }

    /// Why `text` is not `HOST:PORT`, in words for the user.
    package enum Problem: Error, Equatable, CustomStringConvertible {
        case noPort, badPort(String), noHost, unbracketedIPv6
        package var description: String {
            switch self {
            case .noPort: "it has no :PORT"
            case let .badPort(port): "the port '\(port)' is not a number from 0 to 65535"
            case .noHost: "it has no host"
            case .unbracketedIPv6: "an IPv6 address goes in brackets, like [::1]:2197"
            }
        }
    }

    /// Parses `HOST:PORT` or `[IPV6]:PORT`.
    package static func parse(_ text: String) throws(Problem) -> HostPort {
        let host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw .noPort }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw .noPort }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw .noPort }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { throw .unbracketedIPv6 }
        }
        guard !host.isEmpty else { throw .noHost }
        guard portText.allSatisfy(\.isASCII), let port = Int(portText), (0...65_535).contains(port) else {
            throw .badPort(String(portText))
        }
        return HostPort(host: String(host), port: port)
    }

    /// `HOST:PORT`, with brackets around an IPv6 host.
    package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The same host with another port (the one bound for port 0), as `description` writes it.
    package func with(port: Int) -> HostPort { HostPort(host: host, port: port) }

    /// Whether the host is a loopback address or `localhost` (127.0.0.0/8, `::1`).
    package var isLoopback: Bool {
        let lower = host.lowercased()
        if lower == "localhost" || lower == "::1" || lower == "0:0:0:0:0:0:0:1" { return true }
        let parts = lower.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { part in UInt8(part) != nil }
    }

}

/// `TOKEN=KEYCHAIN_DIR` (`apns serve --device`): a device token (64 hex digits, lowercased here) and
/// the keychain store of the simulated phone that receives its pushes.
package struct DeviceBinding: ExpressibleByArgument, Sendable, Equatable {
    /// The device token, lowercase hex.
    package let token: String
    /// The device's keychain directory.
    package let directory: String

    package init?(argument: String) {
        guard let eq = argument.firstIndex(of: "=") else { return nil }
        let token = String(argument[..<eq]).lowercased(), directory = String(argument[argument.index(after: eq)...])
        guard APNsPush.isValidDeviceToken(token), !directory.isEmpty else { return nil }
        self.token = token
        self.directory = directory
    }

}

/// `--environment production|sandbox|https://URL`: which APNs `send` talks to.
package struct APNsEnvironmentArgument: ExpressibleByArgument, Sendable, Equatable, CustomStringConvertible {
    /// The client's environment.
    package let environment: APNsClientConfiguration.Environment

    package init?(argument: String) {
        switch argument {
        case "production": environment = .production
        case "sandbox", "development": environment = .sandbox
        default:
            guard argument.hasPrefix("https://"), argument.count > "https://".count else { return nil }
            environment = .custom(argument)
        }
    }

    /// Whether this is Apple's production service.
    package var isProduction: Bool { if case .production = environment { true } else { false } }

    /// `production`, `sandbox`, or the URL, as given on the command line.
    package var description: String {
        switch environment {
        case .production: "production"
        case .sandbox: "sandbox"
        case let .custom(url): url
        }
    }
}

/// `--attach FILE[:TYPE]`: a file and, after the last `:`, a MIME type when that reads as `kind/subtype`
/// and the whole argument is not an existing file (so `photo:1.jpg` that exists stays a file).
package struct AttachmentArgument: ExpressibleByArgument, Sendable, Equatable {
    /// The file to encrypt.
    package let file: String
    /// The MIME type given after `:`, or `nil` to take the one the extension names.
    package let type: String?

    package init?(argument: String) {
        guard !argument.isEmpty else { return nil }
        if let colon = argument.lastIndex(of: ":"), !FileManager.default.fileExists(atPath: argument) {
            let type = String(argument[argument.index(after: colon)...])
            let parts = type.split(separator: "/", omittingEmptySubsequences: false)
            if parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty, parts[0].allSatisfy({ $0.isLetter }) {
                file = String(argument[..<colon])
                self.type = type
                return
            }
        }
        file = argument
        type = nil
    }

    /// The attachment as the sender takes it.
    package var attachment: MediaAttachment { type.map { MediaAttachment(file: file, type: $0) } ?? MediaAttachment(file: file) }

}
