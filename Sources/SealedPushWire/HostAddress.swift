/// What a URL's host names, as far as its text tells (no DNS lookup): the input of `AttachmentURLPolicy`.
///
/// IPv4 literals are read the way resolvers read them (`inet_aton`, WHATWG URL): one to four parts, each
/// decimal, octal (leading `0`) or hexadecimal (`0x`), so `127.1`, `2130706433` and `0x7f.0.0.1` are all
/// loopback. IPv6 literals (in brackets) classify by their prefix, and IPv4-mapped, IPv4-compatible, NAT64
/// (`64:ff9b::/96`) and 6to4 (`2002::/16`) addresses by the IPv4 address they carry.
public enum HostAddress: String, Sendable, Equatable {
    /// A DNS name, or an address of none of the classes below.
    case publicHost = "public"
    /// `localhost` (and `*.localhost`), `127.0.0.0/8`, `::1`.
    case loopback
    /// `0.0.0.0/8`, `::`.
    case unspecified
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`, `100.64.0.0/10` (carrier-grade NAT), `fc00::/7`, `fec0::/10`.
    case privateNetwork = "private"
    /// `169.254.0.0/16`, `fe80::/10`.
    case linkLocal = "link-local"
    /// Not a valid host: characters a host name cannot hold, a malformed literal, a numeric last label that
    /// is no IPv4 address.
    case invalid

    /// The class of `host` as `AttachmentURLPolicy.split` returns it (IPv6 literals in brackets).
    public static func classify(_ host: String) -> HostAddress {
        var h = host.lowercased()
        guard !h.isEmpty else { return .invalid }
        if h.hasPrefix("[") {
            guard h.hasSuffix("]"), h.count > 2, let bytes = ipv6(h.dropFirst().dropLast()) else { return .invalid }
            return classify(ipv6: bytes)
        }
        if h.hasSuffix("."), h.count > 1 { h.removeLast() }
        let allowed = h.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D || $0 == 0x5F }
        guard allowed else { return .invalid }
        let labels = h.split(separator: ".", omittingEmptySubsequences: false)
        guard !labels.contains(where: \.isEmpty) else { return .invalid }
        if let last = labels.last, isNumber(last) {
            guard let address = ipv4(labels) else { return .invalid }
            return classify(ipv4: address)
        }
        if h == "localhost" || h.hasSuffix(".localhost") { return .loopback }
        return .publicHost
    }

    /// The class of an IPv4 address (four bytes, network order).
    public static func classify(ipv4 a: [UInt8]) -> HostAddress {
        switch (a[0], a[1]) {
        case (0, _): return .unspecified
        case (127, _): return .loopback
        case (10, _): return .privateNetwork
        case (172, let b) where b & 0xF0 == 16: return .privateNetwork
        case (192, 168): return .privateNetwork
        case (100, let b) where b & 0xC0 == 64: return .privateNetwork
        case (169, 254): return .linkLocal
        default: return .publicHost
        }
    }

    /// The class of an IPv6 address (sixteen bytes, network order).
    public static func classify(ipv6 b: [UInt8]) -> HostAddress {
        let zeros = { (range: Range<Int>) in b[range].allSatisfy { $0 == 0 } }
        if zeros(0..<16) { return .unspecified }
        if zeros(0..<15) && b[15] == 1 { return .loopback }
        if zeros(0..<10) && b[10] == 0xFF && b[11] == 0xFF { return classify(ipv4: Array(b[12..<16])) }   // ::ffff:a.b.c.d
        if zeros(0..<12) { return classify(ipv4: Array(b[12..<16])) }                                      // ::a.b.c.d
        if b[0] == 0x00, b[1] == 0x64, b[2] == 0xFF, b[3] == 0x9B, zeros(4..<12) { return classify(ipv4: Array(b[12..<16])) }
        if b[0] == 0x20, b[1] == 0x02 { return classify(ipv4: Array(b[2..<6])) }                          // 6to4
        if b[0] & 0xFE == 0xFC { return .privateNetwork }
        if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return .linkLocal }
        if b[0] == 0xFE && b[1] & 0xC0 == 0xC0 { return .privateNetwork }
        return .publicHost
    }

    /// Whether a label reads as a number (decimal digits, or `0x` and hexadecimal digits): then the host is
    /// an IPv4 address or invalid.
    static func isNumber(_ label: Substring) -> Bool {
        if label.hasPrefix("0x") { return label.dropFirst(2).allSatisfy(\.isHexDigit) }
        return label.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// One part of an `inet_aton` address, or `nil`.
    static func part(_ label: Substring) -> UInt64? {
        guard label.count <= 32 else { return nil }
        if label.hasPrefix("0x") { return label.count == 2 ? 0 : UInt64(label.dropFirst(2), radix: 16) }
        if label.count > 1, label.hasPrefix("0") { return UInt64(label.dropFirst(), radix: 8) }
        return UInt64(label, radix: 10)
    }

    /// The address `labels` spell in `inet_aton`'s forms (`a`, `a.b`, `a.b.c`, `a.b.c.d`), or `nil`.
    static func ipv4(_ labels: [Substring]) -> [UInt8]? {
        guard (1...4).contains(labels.count) else { return nil }
        var values: [UInt64] = []
        for label in labels {
            guard let v = part(label) else { return nil }
            values.append(v)
        }
        guard values.dropLast().allSatisfy({ $0 <= 255 }) else { return nil }
        let lastBits = UInt64(8 * (5 - labels.count))
        guard values.last! < (UInt64(1) << lastBits) else { return nil }
        var address: UInt64 = values.last!
        for (i, v) in values.dropLast().enumerated() { address |= v << UInt64(24 - 8 * i) }
        return [UInt8(address >> 24 & 0xFF), UInt8(address >> 16 & 0xFF), UInt8(address >> 8 & 0xFF), UInt8(address & 0xFF)]
    }

    /// The sixteen bytes of an IPv6 literal without its brackets, or `nil` (zone identifiers are refused).
    static func ipv6(_ text: Substring) -> [UInt8]? {
        guard !text.contains("%") else { return nil }
        let halves = text.components(separatedByDoubleColon: ())
        guard halves.count <= 2 else { return nil }
        func groups(_ part: Substring, last: Bool) -> [UInt8]? {
            guard !part.isEmpty else { return [] }
            var out: [UInt8] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (i, piece) in pieces.enumerated() {
                if last, i == pieces.count - 1, piece.contains(".") {
                    let octets = piece.split(separator: ".", omittingEmptySubsequences: false)
                    guard octets.count == 4 else { return nil }
                    for o in octets {
                        guard (1...3).contains(o.count), o.allSatisfy({ $0.isASCII && $0.isNumber }), let v = Int(o), v <= 255 else { return nil }
                        out.append(UInt8(v))
                    }
                    continue
                }
                guard (1...4).contains(piece.count), piece.allSatisfy(\.isHexDigit), let v = UInt16(piece, radix: 16) else { return nil }
                out += [UInt8(v >> 8), UInt8(v & 0xFF)]
            }
            return out
        }
        if halves.count == 1 {
            guard let all = groups(halves[0], last: true), all.count == 16 else { return nil }
            return all
        }
        guard let head = groups(halves[0], last: false), let tail = groups(halves[1], last: true), head.count + tail.count <= 14 else { return nil }
        return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
    }
}

extension Substring {
    /// The text split at each `::` (`a::b` gives `a`, `b`; `::` gives two empty halves).
    fileprivate func components(separatedByDoubleColon: Void) -> [Substring] {
        var out: [Substring] = []
        var start = startIndex
        var i = startIndex
        while i < endIndex {
            let next = index(after: i)
            if self[i] == ":", next < endIndex, self[next] == ":" {
                out.append(self[start..<i])
                start = index(after: next)
                i = start
                continue
            }
            i = next
        }
        out.append(self[start..<endIndex])
        return out
    }
}
