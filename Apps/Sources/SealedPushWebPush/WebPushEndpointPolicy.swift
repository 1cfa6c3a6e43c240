/// A Web Push endpoint that passed the endpoint rules: where to POST, and the origin it may be named by.
///
/// The endpoint is a capability URL: `description` shows only its origin.
public struct WebPushEndpoint: Sendable, Equatable, CustomStringConvertible {
    /// The whole endpoint URL, as given. Never log it, list it or return it.
    public let url: String
    /// The host, lowercase (an IPv6 literal keeps its brackets; an IPv4 literal, allowed only for private endpoints,
    /// is written in dotted decimal).
    public let host: String
    /// The port (443 when the URL names none).
    public let port: Int
    /// Whether the host is an IP address literal (only with `allowPrivateEndpoints`).
    public let isIPLiteral: Bool

    /// `https://host[:port]`, the port only when it is not 443: the VAPID `aud`, the device's `webpush_origin`.
    public var origin: String { port == 443 ? "https://\(host)" : "https://\(host):\(port)" }

    /// The origin and an ellipsis, never the path.
    public var description: String { origin + "/…" }
}

/// How an IP address is classed by the endpoint rules (platforms v1 §1.1); only `public` is connected to.
public enum WebPushAddressClass: String, Sendable, CaseIterable {
    /// A globally reachable unicast address.
    case publicAddress = "public"
    /// `127.0.0.0/8`, `::1`.
    case loopback
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` (RFC 1918), `fec0::/10` (deprecated site-local),
    /// `64:ff9b:1::/48` (local-use NAT64).
    case privateNetwork = "private"
    /// `fc00::/7` (RFC 4193 unique local addresses).
    case uniqueLocal = "unique-local"
    /// `100.64.0.0/10` (RFC 6598, carrier-grade NAT).
    case sharedAddressSpace = "cgnat"
    /// `169.254.0.0/16`, `fe80::/10`.
    case linkLocal = "link-local"
    /// `224.0.0.0/4`, `ff00::/8`.
    case multicast
    /// `0.0.0.0`, `::`.
    case unspecified
    /// `255.255.255.255`.
    case broadcast
    /// `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`, `3fff::/20`.
    case documentation
    /// `0.0.0.0/8` other than `0.0.0.0` ("this network").
    case thisNetwork = "this-network"
    /// `198.18.0.0/15`, `2001:2::/48`.
    case benchmarking
    /// `240.0.0.0/4` (but the broadcast address), `192.88.99.0/24` (6to4 relays), `100::/64` (discard), and every
    /// IPv6 address outside `2000::/3` that no other case names.
    case reserved
    /// `192.0.0.0/24` (IETF protocol assignments), `2001::/23` other than Teredo and benchmarking.
    case specialPurpose = "special-purpose"
    /// `2001::/32` (Teredo): refused whole — its client address is obfuscated, and no push service is reached through it.
    case teredo
    /// Not 4 or 16 bytes.
    case invalid
}

/// The endpoint rules of platforms v1 §1.1, as pure code: what a registered endpoint may look like, and which
/// resolved addresses the gateway may connect to.
///
/// An endpoint must be `https`, at most 2048 characters of printable ASCII, without user information or fragment,
/// with a DNS host name — not an IP literal in any form a resolver or browser reads (`127.1`, `2130706433`,
/// `0x7f.1`, `[::1]`), not `localhost` or `*.localhost` — and port 443 or one of `allowPorts`. Every address the
/// name resolves to must be public (`classify(address:)`). `allowPrivateEndpoints` (development: a local push
/// service) lifts the host, port and address rules; `https` and the syntax rules stay.
public struct WebPushEndpointPolicy: Sendable, Equatable {
    /// Ports allowed besides 443 (the app's `"webpush": {"allow_ports": […]}`).
    public let allowPorts: Set<Int>
    /// Whether private endpoints are allowed (`"allow_private_endpoints": true`).
    public let allowPrivateEndpoints: Bool

    /// The longest endpoint accepted, in characters.
    public static let maximumLength = 2048

    /// A policy allowing `allowPorts` besides 443, and private endpoints when `allowPrivateEndpoints`.
    public init(allowPorts: some Sequence<Int> = [], allowPrivateEndpoints: Bool = false) {
        self.allowPorts = Set(allowPorts)
        self.allowPrivateEndpoints = allowPrivateEndpoints
    }

    /// Checks `endpoint` against the rules (no DNS lookup: `checkAddresses` checks what the name resolves to).
    public func check(_ endpoint: String) throws(WebPushError) -> WebPushEndpoint {
        let parsed = try Self.parse(endpoint)
        if !allowPrivateEndpoints {
            if parsed.isIPLiteral { throw .endpoint(.ipLiteral(origin: parsed.origin)) }
            if parsed.host == "localhost" || parsed.host.hasSuffix(".localhost") { throw .endpoint(.localhost(origin: parsed.origin)) }
            if parsed.port != 443, !allowPorts.contains(parsed.port) {
                throw .endpoint(.portNotAllowed(origin: parsed.origin, port: parsed.port))
            }
        }
        return parsed
    }

    /// Checks the addresses `origin`'s name resolved to (each 4 or 16 bytes, network order): every one must be
    /// public, and there must be one. Connect only to addresses this passed, so the name is not resolved twice.
    public func checkAddresses(_ addresses: [[UInt8]], origin: String) throws(WebPushError) {
        guard !addresses.isEmpty else { throw .endpoint(.noAddresses(origin: origin)) }
        guard !allowPrivateEndpoints else { return }
        for address in addresses {
            let addressClass = Self.classify(address: address)
            guard addressClass == .publicAddress else { throw .endpoint(.notPublic(origin: origin, addressClass: addressClass)) }
        }
    }

    /// `scheme://host[:port]` of an endpoint (`https`, host lowercase, port only when not 443), or `nil` when it is not
    /// an https URL this parser reads. No policy is applied.
    public static func origin(of endpoint: String) -> String? {
        (try? parse(endpoint))?.origin
    }

    /// Whether `text` is exactly an origin as `origin(of:)` writes it.
    public static func isOrigin(_ text: String) -> Bool {
        origin(of: text) == text
    }

    // MARK: Parsing

    /// The endpoint's parts; only syntax is checked here.
    static func parse(_ text: String) throws(WebPushError) -> WebPushEndpoint {
        let length = text.utf8.count
        guard length > 0, length <= maximumLength else { throw .endpoint(.badLength(length: length, limit: maximumLength)) }
        // Printable ASCII only: no spaces, controls or non-ASCII (an internationalized host is given in punycode); no
        // backslash (WHATWG reads it as `/`) and no fragment.
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x5C && $0 != 0x23 }) else { throw .endpoint(.malformed) }
        guard let separator = text.firstRange(of: "://") else { throw .endpoint(.malformed) }
        let scheme = text[..<separator.lowerBound]
        guard let first = scheme.utf8.first, isLetter(first),
              scheme.utf8.allSatisfy({ isLetter($0) || isDigit($0) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E })
        else { throw .endpoint(.malformed) }
        guard scheme.lowercased() == "https" else { throw .endpoint(.notHTTPS) }
        let rest = text[separator.upperBound...]
        let authority = rest[..<(rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex)]
        guard !authority.contains("@") else { throw .endpoint(.userinfo) }
        guard !authority.isEmpty else { throw .endpoint(.invalidHost) }

        var hostText: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw .endpoint(.invalidHost) }
            hostText = authority[...close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .endpoint(.malformed) }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostText = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            hostText = authority
        }
        var port = 443
        if let portText {
            guard (1...5).contains(portText.utf8.count), portText.utf8.allSatisfy(isDigit), let value = Int(portText),
                  (1...65535).contains(value)
            else { throw .endpoint(.malformed) }
            port = value
        }

        let host = hostText.lowercased()
        if host.hasPrefix("[") {
            // An IPv6 literal: hexadecimal groups, colons, an optional dotted IPv4 tail. Zone ids are refused.
            let inner = host.dropFirst().dropLast()
            guard inner.count >= 2, inner.contains(":"),
                  inner.utf8.allSatisfy({ isDigit($0) || ($0 >= 0x61 && $0 <= 0x66) || $0 == 0x3A || $0 == 0x2E })
            else { throw .endpoint(.invalidHost) }
            return WebPushEndpoint(url: text, host: host, port: port, isIPLiteral: true)
        }
        guard host.utf8.count <= 253, host.utf8.allSatisfy({ isLetter($0) || isDigit($0) || $0 == 0x2D || $0 == 0x2E || $0 == 0x5F })
        else { throw .endpoint(.invalidHost) }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        // An empty label (`a..b`, a leading or trailing dot) is refused: `localhost.` and `example.com.` name other origins.
        guard labels.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 63 }) else { throw .endpoint(.invalidHost) }
        // A host whose last label is a number is an IPv4 address to resolvers (inet_aton) and browsers (WHATWG URL), in
        // any of its forms: `127.1`, `2130706433`, `0x7f.0.0.1`, `017700000001`. One that is not a valid address is invalid.
        if let last = labels.last, isNumber(last) {
            guard let address = ipv4(labels) else { throw .endpoint(.invalidHost) }
            return WebPushEndpoint(url: text, host: address.map(String.init).joined(separator: "."), port: port, isIPLiteral: true)
        }
        return WebPushEndpoint(url: text, host: host, port: port, isIPLiteral: false)
    }

    static func isLetter(_ byte: UInt8) -> Bool { (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) }
    static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    /// Whether a label reads as a number to the WHATWG URL parser: decimal digits, or `0x` and hexadecimal digits.
    static func isNumber(_ label: Substring) -> Bool {
        if label.hasPrefix("0x") { return label.dropFirst(2).allSatisfy(\.isHexDigit) }
        return label.utf8.allSatisfy(isDigit)
    }

    /// The address `labels` spell in `inet_aton`'s forms (`a`, `a.b`, `a.b.c`, `a.b.c.d`; each part decimal, octal
    /// with a leading `0`, or hexadecimal with `0x`), or `nil`.
    static func ipv4(_ labels: [Substring]) -> [UInt8]? {
        guard (1...4).contains(labels.count) else { return nil }
        var values: [UInt64] = []
        for label in labels {
            guard label.utf8.count <= 32 else { return nil }
            let value: UInt64?
            if label.hasPrefix("0x") {
                value = label.count == 2 ? 0 : UInt64(label.dropFirst(2), radix: 16)
            } else if label.count > 1, label.hasPrefix("0") {
                value = UInt64(label.dropFirst(), radix: 8)
            } else {
                value = UInt64(label, radix: 10)
            }
            guard let value else { return nil }
            values.append(value)
        }
        guard let last = values.last, values.dropLast().allSatisfy({ $0 <= 255 }),
              last < (UInt64(1) << UInt64(8 * (5 - labels.count)))
        else { return nil }
        var address = last
        for (i, v) in values.dropLast().enumerated() { address |= v << UInt64(24 - 8 * i) }
        return [UInt8(address >> 24 & 0xFF), UInt8(address >> 16 & 0xFF), UInt8(address >> 8 & 0xFF), UInt8(address & 0xFF)]
    }

    // MARK: Addresses

    /// The class of a resolved address: 4 bytes (IPv4) or 16 (IPv6), network order.
    ///
    /// IPv6 addresses that carry an IPv4 address — IPv4-mapped (`::ffff:0:0/96`), IPv4-compatible (`::/96`), NAT64
    /// (`64:ff9b::/96`) and 6to4 (`2002::/16`) — class as the address they carry. Teredo (`2001::/32`) is refused
    /// whole. Outside `2000::/3` (global unicast), anything not named is `reserved`.
    public static func classify(address: [UInt8]) -> WebPushAddressClass {
        switch address.count {
        case 4: return classify(ipv4: address)
        case 16: return classify(ipv6: address)
        default: return .invalid
        }
    }

    static func classify(ipv4 a: [UInt8]) -> WebPushAddressClass {
        switch (a[0], a[1], a[2]) {
        case (0, 0, 0) where a[3] == 0: return .unspecified
        case (0, _, _): return .thisNetwork
        case (10, _, _): return .privateNetwork
        case (100, let b, _) where b & 0xC0 == 64: return .sharedAddressSpace
        case (127, _, _): return .loopback
        case (169, 254, _): return .linkLocal
        case (172, let b, _) where b & 0xF0 == 16: return .privateNetwork
        case (192, 0, 0): return .specialPurpose
        case (192, 0, 2), (198, 51, 100), (203, 0, 113): return .documentation
        case (192, 88, 99): return .reserved
        case (192, 168, _): return .privateNetwork
        case (198, let b, _) where b & 0xFE == 18: return .benchmarking
        case (255, 255, 255) where a[3] == 255: return .broadcast
        case (let first, _, _) where first & 0xF0 == 224: return .multicast
        case (let first, _, _) where first & 0xF0 == 240: return .reserved
        default: return .publicAddress
        }
    }

    static func classify(ipv6 b: [UInt8]) -> WebPushAddressClass {
        func zeros(_ range: Range<Int>) -> Bool { b[range].allSatisfy { $0 == 0 } }
        let embedded = { (start: Int) in classify(ipv4: Array(b[start..<(start + 4)])) }
        if zeros(0..<16) { return .unspecified }
        if zeros(0..<15), b[15] == 1 { return .loopback }
        if zeros(0..<10), b[10] == 0xFF, b[11] == 0xFF { return embedded(12) }                 // ::ffff:a.b.c.d (mapped)
        if zeros(0..<12) { return embedded(12) }                                               // ::a.b.c.d (compatible)
        if b[0] == 0x00, b[1] == 0x64, b[2] == 0xFF, b[3] == 0x9B {
            if zeros(4..<12) { return embedded(12) }                                           // 64:ff9b::/96 (NAT64)
            if b[4] == 0x00, b[5] == 0x01 { return .privateNetwork }                           // 64:ff9b:1::/48 (local NAT64)
        }
        if b[0] == 0x01, zeros(1..<8) { return .reserved }                                     // 100::/64 (discard)
        if b[0] == 0xFF { return .multicast }
        if b[0] & 0xFE == 0xFC { return .uniqueLocal }
        if b[0] == 0xFE, b[1] & 0xC0 == 0x80 { return .linkLocal }
        if b[0] == 0xFE, b[1] & 0xC0 == 0xC0 { return .privateNetwork }                        // fec0::/10 (site-local)
        if b[0] == 0x20, b[1] == 0x02 { return embedded(2) }                                   // 2002::/16 (6to4)
        if b[0] == 0x20, b[1] == 0x01 {
            if b[2] == 0x0D, b[3] == 0xB8 { return .documentation }                            // 2001:db8::/32
            if b[2] == 0x00, b[3] == 0x00 { return .teredo }                                   // 2001::/32
            if b[2] == 0x00, b[3] == 0x02, b[4] == 0x00, b[5] == 0x00 { return .benchmarking }  // 2001:2::/48
            if b[2] & 0xFE == 0x00 { return .specialPurpose }                                  // 2001::/23
        }
        if b[0] == 0x3F, b[1] == 0xFF, b[2] & 0xF0 == 0x00 { return .documentation }          // 3fff::/20
        if b[0] & 0xE0 != 0x20 { return .reserved }                                            // outside 2000::/3
        return .publicAddress
    }
}
