public import SealedPushCrypto

/// The kind of a media type (attachments v1 §3), which sets the largest file a message may carry.
public enum MediaKind: String, Sendable, CaseIterable {
    /// A still or animated image.
    case image
    /// A sound.
    case audio
    /// A movie.
    case movie

    /// The largest file `size` of this kind, in bytes (Apple's limits read as decimal megabytes).
    public var sizeLimit: Int {
        switch self {
        case .image: return 10_000_000
        case .audio: return 5_000_000
        case .movie: return 50_000_000
        }
    }
}

/// One row of the attachment type table (attachments v1 §3): MIME type, kind, magic bytes, file extension.
public struct MediaType: Sendable, Equatable, CustomStringConvertible {
    /// The MIME type as written in a descriptor.
    public let mime: String
    /// The kind, which sets the size limit.
    public let kind: MediaKind
    /// The file name extension the receiver writes, with its dot (`.jpg`).
    public let fileExtension: String
    /// The fewest bytes a file of this type can start with (its signature's length).
    public let minimumSize: Int
    private let signature: @Sendable ([UInt8]) -> Bool

    private init(_ mime: String, _ kind: MediaKind, _ fileExtension: String, minimumSize: Int,
                 _ signature: @escaping @Sendable ([UInt8]) -> Bool) {
        self.mime = mime
        self.kind = kind
        self.fileExtension = fileExtension
        self.minimumSize = minimumSize
        self.signature = signature
    }

    /// The number of leading file bytes `matches(prefix:)` needs.
    public static let signaturePrefixLength = 12

    /// Whether a file starting with `prefix` (its first `signaturePrefixLength` bytes, or the whole file
    /// if shorter) starts as §3 says for this type.
    public func matches(prefix: [UInt8]) -> Bool { prefix.count >= minimumSize && signature(prefix) }

    /// The MIME type.
    public var description: String { mime }

    /// Equal when the MIME types are.
    public static func == (lhs: MediaType, rhs: MediaType) -> Bool { lhs.mime == rhs.mime }

    private static func starts(_ p: [UInt8], _ magic: [UInt8], at offset: Int = 0) -> Bool {
        p.count >= offset + magic.count && Array(p[offset..<(offset + magic.count)]) == magic
    }

    private static func ascii(_ s: String) -> [UInt8] { Array(s.utf8) }

    /// Every type of the table, in its order.
    public static let all: [MediaType] = [
        MediaType("image/jpeg", .image, ".jpg", minimumSize: 3) { starts($0, [0xFF, 0xD8, 0xFF]) },
        MediaType("image/png", .image, ".png", minimumSize: 8) { starts($0, [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) },
        MediaType("image/gif", .image, ".gif", minimumSize: 6) { starts($0, ascii("GIF87a")) || starts($0, ascii("GIF89a")) },
        MediaType("audio/mpeg", .audio, ".mp3", minimumSize: 2) { p in
            starts(p, ascii("ID3")) || (p.count >= 2 && p[0] == 0xFF && p[1] & 0xE0 == 0xE0)
        },
        MediaType("audio/wav", .audio, ".wav", minimumSize: 12) { starts($0, ascii("RIFF")) && starts($0, ascii("WAVE"), at: 8) },
        MediaType("audio/aiff", .audio, ".aiff", minimumSize: 12) { p in
            starts(p, ascii("FORM")) && (starts(p, ascii("AIFF"), at: 8) || starts(p, ascii("AIFC"), at: 8))
        },
        MediaType("audio/mp4", .audio, ".m4a", minimumSize: 8) { starts($0, ascii("ftyp"), at: 4) },
        MediaType("video/mp4", .movie, ".mp4", minimumSize: 8) { starts($0, ascii("ftyp"), at: 4) },
        MediaType("video/mpeg", .movie, ".mpg", minimumSize: 4) { starts($0, [0, 0, 1, 0xBA]) || starts($0, [0, 0, 1, 0xB3]) },
        MediaType("video/x-msvideo", .movie, ".avi", minimumSize: 12) { starts($0, ascii("RIFF")) && starts($0, ascii("AVI "), at: 8) },
    ]

    /// The table's row for a MIME type (exact match), or `nil` for a type the format does not carry.
    public static func named(_ mime: String) -> MediaType? { all.first { $0.mime == mime } }

    /// The table's row for a file name's extension (case-insensitive; `.jpeg` and `.aif` too), or `nil`.
    public static func forFileExtension(_ ext: String) -> MediaType? {
        let e = "." + ext.lowercased().drop { $0 == "." }
        switch e {
        case ".jpeg": return named("image/jpeg")
        case ".aif": return named("audio/aiff")
        case ".mpeg": return named("video/mpeg")
        default: return all.first { $0.fileExtension == e }
        }
    }
}

/// One entry of a body's `attachments` array (attachments v1 §1): where the media object is, its key, and what it holds.
public struct AttachmentDescriptor: Sendable, Equatable {
    /// The attachment's identifier: 1–64 of `A–Z a–z 0–9 . _ -`, unique within the message.
    public var id: String
    /// Where the media object is served (checked when fetched, §4).
    public var url: String
    /// The 32-byte media key.
    public var key: SecureBytes
    /// The MIME type (§3; other strings parse, and fail that attachment alone when fetched).
    public var type: String
    /// The file's exact length in bytes (≥ 1).
    public var size: Int
    /// A display name (1–128 characters, no `/`, `\` or NUL); never used as a path.
    public var name: String?
    /// `UNNotificationAttachmentOptionsThumbnailHiddenKey`.
    public var thumbnailHidden: Bool?
    /// `UNNotificationAttachmentOptionsThumbnailTimeKey`: seconds into a movie, or a frame.
    public var thumbnailTime: Int64?

    /// The most descriptors a message carries.
    public static let maximumCount = 4
    /// The longest `url`, in bytes.
    public static let maximumURLLength = 2048

    /// A descriptor from its members.
    public init(id: String, url: String, key: SecureBytes, type: String, size: Int, name: String? = nil,
                thumbnailHidden: Bool? = nil, thumbnailTime: Int64? = nil) {
        self.id = id
        self.url = url
        self.key = key
        self.type = type
        self.size = size
        self.name = name
        self.thumbnailHidden = thumbnailHidden
        self.thumbnailTime = thumbnailTime
    }

    /// The descriptor as a JSON object with the wire names (the key as padded standard base64).
    public var jsonObject: JSONObject {
        var o = JSONObject()
        o["id"] = .string(id)
        o["url"] = .string(url)
        o["key"] = .string(Base64.encode(key.unsafeCopyToArray()))
        o["type"] = .string(type)
        o["size"] = .int(Int64(size))
        if let name { o["name"] = .string(name) }
        if let thumbnailHidden { o["thumbnail-hidden"] = .bool(thumbnailHidden) }
        if let thumbnailTime { o["thumbnail-time"] = .int(thumbnailTime) }
        return o
    }

    /// Whether `id` is 1–64 characters of `A–Z a–z 0–9 . _ -`.
    public static func isValidID(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        return (1...64).contains(bytes.count) && bytes.allSatisfy { b in
            (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2E || b == 0x5F || b == 0x2D
        }
    }

    /// Whether `name` is 1–128 characters without `/`, `\` or NUL.
    public static func isValidName(_ name: String) -> Bool {
        (1...128).contains(name.count) && !name.unicodeScalars.contains { $0 == "/" || $0 == "\\" || $0 == "\u{0}" }
    }

    /// Reads and validates one descriptor (§1); anything structurally wrong is `malformedMessage`.
    public init(validating o: JSONObject) throws(OpenFailure) {
        func fail(_ why: String) -> OpenFailure { OpenFailure(.malformedMessage, "attachment: \(why)") }
        func string(_ k: String) throws(OpenFailure) -> String? {
            guard let v = o[k] else { return nil }
            guard case let .string(s) = v else { throw fail("member '\(k)' must be a string") }
            return s
        }
        guard let id = try string("id") else { throw fail("member 'id' is required") }
        guard Self.isValidID(id) else { throw fail("member 'id' must be 1 to 64 of A-Z a-z 0-9 . _ -") }
        guard let url = try string("url") else { throw fail("member 'url' is required") }
        guard url.utf8.count <= Self.maximumURLLength else { throw fail("member 'url' is longer than 2048 bytes") }
        guard let keyText = try string("key") else { throw fail("member 'key' is required") }
        guard let keyBytes = try? Base64.decode(keyText), keyBytes.count == SecretStream.keyByteCount else {
            throw fail("member 'key' must be base64 of 32 bytes")
        }
        guard let type = try string("type") else { throw fail("member 'type' is required") }
        guard let sizeValue = o["size"] else { throw fail("member 'size' is required") }
        guard case let .int(size) = sizeValue, size >= 1 else { throw fail("member 'size' must be an integer of at least 1") }
        let name = try string("name")
        if let name, !Self.isValidName(name) { throw fail("member 'name' must be 1 to 128 characters without '/', '\\' or NUL") }
        var hidden: Bool?
        if let v = o["thumbnail-hidden"] {
            guard case let .bool(b) = v else { throw fail("member 'thumbnail-hidden' must be a boolean") }
            hidden = b
        }
        var time: Int64?
        if let v = o["thumbnail-time"] {
            guard case let .int(t) = v, t >= 0 else { throw fail("member 'thumbnail-time' must be an integer of at least 0") }
            time = t
        }
        // Sizes past Int's range cannot be any kind's size; clamp so the §4 limit check rejects them.
        self.init(id: id, url: url, key: SecureBytes(keyBytes), type: type, size: Int(clamping: size), name: name,
                  thumbnailHidden: hidden, thumbnailTime: time)
    }

    /// Reads a body's `attachments` member (§1): an array of 1 to 4 valid descriptors with distinct ids.
    public static func validatingList(_ value: JSONValue) throws(OpenFailure) -> [AttachmentDescriptor] {
        guard case let .array(items) = value else { throw OpenFailure(.malformedMessage, "member 'attachments' must be an array") }
        guard (1...maximumCount).contains(items.count) else {
            throw OpenFailure(.malformedMessage, "member 'attachments' must hold 1 to \(maximumCount) descriptors")
        }
        var out: [AttachmentDescriptor] = []
        var ids = Set<String>()
        for item in items {
            guard case let .object(o) = item else { throw OpenFailure(.malformedMessage, "each attachment must be an object") }
            let descriptor = try AttachmentDescriptor(validating: o)
            guard ids.insert(descriptor.id).inserted else { throw OpenFailure(.malformedMessage, "attachment ids must be unique") }
            out.append(descriptor)
        }
        return out
    }
}

/// The §4 rule for where a media object may be fetched from, in production or in development.
///
/// Production (the default): `https` only, and never to an address literal that names this device or its
/// local networks (loopback, unspecified, private, link-local, in any spelling a resolver accepts), nor to
/// `localhost`; a redirect from `https` to `http` is refused whatever the policy. Development
/// (`allowsLocalHosts`, turned on explicitly by a simulated device or a test): also `http` to `localhost`,
/// `127.0.0.0/8` or `[::1]`, and `https` to the local addresses. Otherwise a sender could make the phone
/// probe its own loopback ports and its local network, and learn the answers from receipts' failure counts.
public struct AttachmentURLPolicy: Sendable, Equatable {
    /// Whether development hosts are allowed: `http` to loopback, and `https` to loopback, private,
    /// link-local and unspecified addresses (`localhost` included).
    public var allowsLocalHosts: Bool

    /// A policy; `allowsLocalHosts` is off unless asked for.
    public init(allowsLocalHosts: Bool = false) {
        self.allowsLocalHosts = allowsLocalHosts
    }

    /// What a phone in the field does: `https` to public hosts only.
    public static let production = AttachmentURLPolicy()
    /// What a development setup needs: also loopback `http` and local addresses over `https`.
    public static let development = AttachmentURLPolicy(allowsLocalHosts: true)

    /// Why `url` may not be fetched under this policy, or `nil` when it may: the one function for the rule.
    ///
    /// The answer never quotes the URL (it can carry names a log must not).
    public func problem(_ url: String) -> String? {
        guard let parts = Self.split(url) else { return "the URL is not a valid absolute URL" }
        let host = HostAddress.classify(parts.host)
        switch parts.scheme {
        case "https":
            switch host {
            case .invalid: return "the URL's host is not a valid host name or address"
            case .publicHost: return nil
            case .loopback, .unspecified, .privateNetwork, .linkLocal:
                return allowsLocalHosts ? nil
                    : "the URL's host is a \(host.rawValue) address, which a device fetches only in development"
            }
        case "http":
            guard allowsLocalHosts else { return "the URL is not https (http only to loopback, in development)" }
            return Self.isLoopback(host: parts.host) ? nil : "the URL is not https (nor http to localhost, 127.0.0.0/8 or [::1])"
        default:
            return "the URL is not https"
        }
    }

    /// Whether `url` may be fetched under this policy (`problem(_:)` is `nil`).
    public func isAllowed(_ url: String) -> Bool { problem(url) == nil }

    /// Why a redirect from `from` to `to` (already resolved) may not be followed, or `nil` when it may:
    /// never from `https` to `http`, and `to` must pass `problem(_:)`.
    public func redirectProblem(from: String, to: String) -> String? {
        if Self.split(from)?.scheme == "https", Self.split(to)?.scheme == "http" { return "a redirect goes from https to http" }
        return problem(to).map { "a redirect goes to a URL that is refused: " + $0 }
    }

    /// Whether `host` (as in a URL, IPv6 in brackets) is `localhost`, a dotted quad in `127.0.0.0/8`, or `[::1]`:
    /// the hosts plain `http` may reach in development (§1).
    public static func isLoopback(host: String) -> Bool {
        let h = host.lowercased()
        if h == "localhost" || h == "[::1]" { return true }
        let octets = h.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else { return false }
        let values = octets.compactMap { o -> Int? in
            guard (1...3).contains(o.count), o.allSatisfy(\.isASCII), o.allSatisfy(\.isNumber) else { return nil }
            return Int(o)
        }
        return values.count == 4 && values.allSatisfy { $0 <= 255 } && values[0] == 127
    }

    /// The lowercased scheme and the host of an absolute URL, or `nil` if it is not one.
    public static func split(_ url: String) -> (scheme: String, host: String)? {
        let bytes = Array(url.utf8)
        // No backslash: WHATWG parsers read it as `/` in an http(s) URL, so the host they fetch would differ.
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) else { return nil }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return nil }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
        guard scheme.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E }),
              bytes.count > colon + 2, bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/") else { return nil }
        let rest = bytes[(colon + 3)...]
        let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        var authority = Array(rest[rest.startIndex..<authorityEnd])
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) { authority = Array(authority[(at + 1)...]) }
        var host = authority
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            host = Array(authority[...close])
            let tail = authority[(close + 1)...]
            if !tail.isEmpty {
                guard tail.first == UInt8(ascii: ":"), tail.dropFirst().allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            }
        } else if let portColon = authority.firstIndex(of: UInt8(ascii: ":")) {
            host = Array(authority[..<portColon])
            guard authority[(portColon + 1)...].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        }
        guard !host.isEmpty else { return nil }
        return (scheme, String(decoding: host, as: UTF8.self))
    }
}
