import SealedPushWire
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An app's `matrix` section (matrix v1 §1): the Matrix `app_id`s it answers for, each with its push platform,
/// the homeserver addresses it takes notifications from, and what a counts-only notification becomes.
public struct MatrixAppSettings: Sendable {
    /// Where a Matrix `app_id`'s devices are reached.
    public struct Target: Sendable, Equatable {
        /// The push service.
        public let platform: PushPlatform
        /// APNs's environment for `apns` (`production` by default); `production` for the other platforms.
        public let environment: APNsEnvironmentName
    }

    /// What a notification with counts and no `event_id` (a badge update) becomes (matrix v1 §4).
    public enum CountsOnly: String, Sendable, Equatable {
        /// APNs: `aps.badge` in the clear, no alert; FCM and Web Push: a sealed message with the badge.
        case badge
        /// Not sent.
        case drop
    }

    /// The Matrix `app_id`s this app answers for (`pusher.app_id`, e.g. `im.example.ios`).
    public let appIDs: [String: Target]
    /// The networks notifications may come from, or nil for any address.
    public let allowedSources: [IPNetwork]?
    /// What a badge update becomes.
    public let countsOnly: CountsOnly

    /// Whether a notification from `source` (an IP address as text) is taken.
    public func allows(source: String) -> Bool {
        guard let allowedSources else { return true }
        guard let address = IPNetwork.address(source) else { return false }
        return allowedSources.contains { $0.contains(address) }
    }
}

/// An IPv4 or IPv6 network (`203.0.113.0/24`, `2001:db8::/32`, or one address), for `allowed_sources`.
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    /// The network's address bytes (4 or 16).
    public let bytes: [UInt8]
    /// The prefix length in bits.
    public let prefix: Int

    /// Parses `ADDRESS` or `ADDRESS/PREFIX`; nil when malformed or the prefix is too long for the family.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = Self.address(String(parts[0])) else { return nil }
        let prefix: Int
        if parts.count == 2 {
            guard let p = Int(parts[1]), parts[1].allSatisfy(\.isASCII), (0...bytes.count * 8).contains(p) else { return nil }
            prefix = p
        } else {
            prefix = bytes.count * 8
        }
        self.bytes = bytes
        self.prefix = prefix
    }

    /// Whether `address` (4 or 16 bytes) is in the network; an IPv4-mapped IPv6 address counts as its IPv4 address.
    public func contains(_ address: [UInt8]) -> Bool {
        var address = address
        if address.count == 16, bytes.count == 4, address[0..<10].allSatisfy({ $0 == 0 }), address[10] == 0xff, address[11] == 0xff {
            address = Array(address[12...])
        }
        guard address.count == bytes.count else { return false }
        var bits = prefix
        for (a, b) in zip(address, bytes) where bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xff : ~(0xff >> UInt8(bits))
            if a & mask != b & mask { return false }
            bits -= 8
        }
        return true
    }

    /// `address/prefix`.
    public var description: String {
        let text = bytes.count == 4 ? bytes.map(String.init).joined(separator: ".")
            : stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }.joined(separator: ":")
        return "\(text)/\(prefix)"
    }

    /// An IP address's bytes from its text (dotted IPv4, or IPv6 with `::` and an optional dotted tail); nil otherwise.
    public static func address(_ text: String) -> [UInt8]? {
        if !text.contains(":") { return ipv4(Substring(text)) }
        var text = Substring(text)
        if let zone = text.firstIndex(of: "%") { text = text[..<zone] }
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ part: String, allowTail: Bool) -> [UInt8]? {
            if part.isEmpty { return [] }
            var out: [UInt8] = []
            let items = part.split(separator: ":", omittingEmptySubsequences: false)
            for (n, item) in items.enumerated() {
                if allowTail, n == items.count - 1, item.contains(".") {
                    guard let v4 = ipv4(item) else { return nil }
                    out += v4
                } else {
                    guard (1...4).contains(item.count), let v = UInt16(item, radix: 16) else { return nil }
                    out += [UInt8(v >> 8), UInt8(v & 0xff)]
                }
            }
            return out
        }
        if halves.count == 1 {
            guard let all = groups(halves[0], allowTail: true), all.count == 16 else { return nil }
            return all
        }
        guard let head = groups(halves[0], allowTail: false), let tail = groups(halves[1], allowTail: true),
              head.count + tail.count <= 14 else { return nil }
        return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
    }

    static func ipv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var out: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ $0 >= "0" && $0 <= "9" }), let v = UInt8(part) else { return nil }
            out.append(v)
        }
        return out
    }
}

extension ConfigReader {
    /// `"matrix": {"app_ids": {APP_ID: {"platform", "environment"?}}, "allowed_sources"?, "counts_only"?}` (matrix v1 §1),
    /// or nil. Each `app_id`'s platform must be one the app serves.
    func matrixSection(_ o: JSONObject, at pointer: String, serves: (PushPlatform) -> Bool) throws(GatewayConfigurationError) -> MatrixAppSettings? {
        guard let value = o["matrix"], value != .null else { return nil }
        let at = "\(pointer)/matrix"
        guard case let .object(m) = value else {
            throw GatewayConfigurationError(at, "must be an object {\"app_ids\": {\"im.example.ios\": {\"platform\": \"apns\"}}, \"allowed_sources\", \"counts_only\"} (matrix v1 §1)")
        }
        try allowOnly(m, at: at, ["app_ids", "allowed_sources", "counts_only"])
        guard case let .object(ids)? = m["app_ids"], ids.count > 0 else {
            throw GatewayConfigurationError("\(at)/app_ids", "list at least one Matrix app_id, e.g. {\"im.example.ios\": {\"platform\": \"apns\", \"environment\": \"production\"}}")
        }
        var targets: [String: MatrixAppSettings.Target] = [:]
        for entry in ids {
            let idAt = "\(at)/app_ids/\(MemberReader.escape(entry.key))"
            guard (1...64).contains(entry.key.utf8.count), entry.key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
                throw GatewayConfigurationError(idAt, "a Matrix app_id is 1 to 64 printable ASCII characters without spaces (the pusher's app_id, e.g. \"im.example.ios\")")
            }
            guard case let .object(t) = entry.value else {
                throw GatewayConfigurationError(idAt, "must be an object {\"platform\": \"apns\" | \"fcm\" | \"webpush\", \"environment\": \"production\" | \"sandbox\" (apns only)}")
            }
            try allowOnly(t, at: idAt, ["platform", "environment"])
            guard let platformName = try string(t, "platform", at: idAt), let platform = PushPlatform(rawValue: platformName) else {
                throw GatewayConfigurationError("\(idAt)/platform", "must be \"apns\", \"fcm\" or \"webpush\"")
            }
            guard serves(platform) else {
                throw GatewayConfigurationError("\(idAt)/platform", "is \(platform.rawValue), and this app has no \(platform.rawValue) section; add one, or name a platform the app serves")
            }
            var environment = APNsEnvironmentName.production
            if let name = try string(t, "environment", at: idAt, required: false) {
                guard platform == .apns else {
                    throw GatewayConfigurationError("\(idAt)/environment", "belongs to apns alone; remove it")
                }
                guard let env = APNsEnvironmentName(rawValue: name) else {
                    throw GatewayConfigurationError("\(idAt)/environment", "must be \"production\" or \"sandbox\" (apps built for development use sandbox)")
                }
                environment = env
            }
            targets[entry.key] = .init(platform: platform, environment: environment)
        }
        var sources: [IPNetwork]?
        switch m["allowed_sources"] {
        case nil, .null?: sources = nil
        case let .array(items)?:
            var list: [IPNetwork] = []
            for (n, item) in items.enumerated() {
                guard let text = item.stringValue, let network = IPNetwork(text) else {
                    throw GatewayConfigurationError("\(at)/allowed_sources/\(n)", "must be an IP address or network, e.g. \"203.0.113.0/24\" or \"2001:db8::/32\"")
                }
                list.append(network)
            }
            sources = list
        default:
            throw GatewayConfigurationError("\(at)/allowed_sources", "must be an array of the homeservers' addresses or networks, e.g. [\"203.0.113.0/24\"], or null for any address")
        }
        let countsOnly: MatrixAppSettings.CountsOnly
        switch m["counts_only"] {
        case nil, .null?: countsOnly = .badge
        case let .string(s)?:
            guard let c = MatrixAppSettings.CountsOnly(rawValue: s) else {
                throw GatewayConfigurationError("\(at)/counts_only", "must be \"badge\" (a badge update shows its count to APNs, as with Sygnal) or \"drop\" (not sent)")
            }
            countsOnly = c
        default: throw GatewayConfigurationError("\(at)/counts_only", "must be \"badge\" or \"drop\"")
        }
        return MatrixAppSettings(appIDs: targets, allowedSources: sources, countsOnly: countsOnly)
    }
}

extension GatewayConfiguration {
    /// A Matrix `app_id` belongs to at most one app (matrix v1 §1): the error names both apps.
    static func checkMatrixAppIDs(_ apps: [GatewayAppConfiguration]) throws(GatewayConfigurationError) {
        var owner: [String: String] = [:]
        for app in apps {
            for id in (app.matrix?.appIDs.keys).map(Array.init)?.sorted() ?? [] {
                if let first = owner[id] {
                    throw GatewayConfigurationError("/apps/\(app.id)/matrix/app_ids/\(MemberReader.escape(id))",
                                                    "the Matrix app_id \"\(id)\" is in app \"\(first)\" and in app \"\(app.id)\"; a Matrix app_id belongs to one app: remove it from one of them")
                }
                owner[id] = app.id
            }
        }
    }
}
