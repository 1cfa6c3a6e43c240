public import SealedPushCrypto

/// The JSON body of an inner message (wire format §4).
///
/// `Codable` with the wire names (`iat`, `exp`, `thread-id`); the receiver's hot path reads it from
/// the strict parser's `JSONObject` with `init(validating:)`, which applies every §4 rule.
public struct MessageBody: Sendable, Equatable, Codable {
    /// The visible text of a notification.
    public struct Alert: Sendable, Equatable, Codable {
        /// The title, or `nil`.
        public var title: String?
        /// The subtitle, or `nil`.
        public var subtitle: String?
        /// The body text, or `nil`.
        public var body: String?

        /// An alert from its three optional strings.
        public init(title: String? = nil, subtitle: String? = nil, body: String? = nil) {
            self.title = title
            self.subtitle = subtitle
            self.body = body
        }

        /// Whether at least one of title, subtitle and body is a non-empty string.
        public var hasVisibleText: Bool {
            !(title ?? "").isEmpty || !(subtitle ?? "").isEmpty || !(body ?? "").isEmpty
        }
    }

    /// The recipient key id; must equal the envelope's.
    public var kid: KeyID
    /// A unique message id (1–64 bytes of UTF-8).
    public var id: String
    /// Issued-at, seconds since the Unix epoch.
    public var issuedAt: Int64
    /// Expiry, seconds since the Unix epoch, or `nil` for none.
    public var expiresAt: Int64?
    /// The visible text.
    public var alert: Alert
    /// The notification thread id.
    public var threadID: String?
    /// The notification category.
    public var category: String?
    /// The sound name.
    public var sound: String?
    /// The app badge number.
    public var badge: Int64?
    /// Custom data merged into the notification's userInfo (never holds `aps`).
    public var data: JSONObject?
    /// The sender key id; required when the message is signed.
    public var sender: KeyID?
    /// Encrypted media to fetch (attachments v1 §1): 1 to 4 descriptors in display order, or `nil` for none.
    public var attachments: [AttachmentDescriptor]?
    /// Where to send a delivery receipt, and its token (receipts v1 §1), or `nil` for none.
    public var receipt: ReceiptRequest?
    /// For a reveal message (reveal v1 §2): the base64 of a wire v1 envelope sealed to the device's
    /// reveal key, holding the text; `alert` is then the placeholder iOS may show. `nil` otherwise.
    public var reveal: String?

    enum CodingKeys: String, CodingKey {
        case kid, id, iat, exp, alert, category, sound, badge, data, sender, attachments, receipt, reveal
        case threadID = "thread-id"
    }

    /// A body from its members.
    public init(kid: KeyID, id: String, issuedAt: Int64, expiresAt: Int64? = nil, alert: Alert, threadID: String? = nil,
                category: String? = nil, sound: String? = nil, badge: Int64? = nil, data: JSONObject? = nil, sender: KeyID? = nil,
                attachments: [AttachmentDescriptor]? = nil, receipt: ReceiptRequest? = nil, reveal: String? = nil) {
        self.kid = kid
        self.id = id
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.alert = alert
        self.threadID = threadID
        self.category = category
        self.sound = sound
        self.badge = badge
        self.data = data
        self.sender = sender
        self.attachments = attachments
        self.receipt = receipt
        self.reveal = reveal
    }

    /// Decodes with the wire names.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        kid = try c.decode(KeyID.self, forKey: .kid)
        id = try c.decode(String.self, forKey: .id)
        issuedAt = try c.decode(Int64.self, forKey: .iat)
        expiresAt = try c.decodeIfPresent(Int64.self, forKey: .exp)
        alert = try c.decode(Alert.self, forKey: .alert)
        threadID = try c.decodeIfPresent(String.self, forKey: .threadID)
        category = try c.decodeIfPresent(String.self, forKey: .category)
        sound = try c.decodeIfPresent(String.self, forKey: .sound)
        badge = try c.decodeIfPresent(Int64.self, forKey: .badge)
        data = try c.decodeIfPresent(JSONObject.self, forKey: .data)
        sender = try c.decodeIfPresent(KeyID.self, forKey: .sender)
        if let list = try c.decodeIfPresent(JSONValue.self, forKey: .attachments) {
            do { attachments = try AttachmentDescriptor.validatingList(list) } catch {
                throw DecodingError.dataCorruptedError(forKey: .attachments, in: c, debugDescription: error.detail)
            }
        }
        if let value = try c.decodeIfPresent(JSONValue.self, forKey: .receipt) {
            do { receipt = try ReceiptRequest(validating: value) } catch {
                throw DecodingError.dataCorruptedError(forKey: .receipt, in: c, debugDescription: error.detail)
            }
        }
        reveal = try c.decodeIfPresent(String.self, forKey: .reveal)
    }

    /// Encodes with the wire names, omitting absent members.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(kid, forKey: .kid)
        try c.encode(id, forKey: .id)
        try c.encode(issuedAt, forKey: .iat)
        try c.encodeIfPresent(expiresAt, forKey: .exp)
        try c.encode(alert, forKey: .alert)
        try c.encodeIfPresent(threadID, forKey: .threadID)
        try c.encodeIfPresent(category, forKey: .category)
        try c.encodeIfPresent(sound, forKey: .sound)
        try c.encodeIfPresent(badge, forKey: .badge)
        try c.encodeIfPresent(data, forKey: .data)
        try c.encodeIfPresent(sender, forKey: .sender)
        try c.encodeIfPresent(attachments.map { JSONValue.array($0.map { .object($0.jsonObject) }) }, forKey: .attachments)
        try c.encodeIfPresent(receipt.map { JSONValue.object($0.jsonObject) }, forKey: .receipt)
        try c.encodeIfPresent(reveal, forKey: .reveal)
    }

    /// The body as a JSON object, members in the order above, absent members omitted.
    public var jsonObject: JSONObject {
        var o = JSONObject()
        o["kid"] = .string(kid.hex)
        o["id"] = .string(id)
        o["iat"] = .int(issuedAt)
        if let expiresAt { o["exp"] = .int(expiresAt) }
        var a = JSONObject()
        if let t = alert.title { a["title"] = .string(t) }
        if let s = alert.subtitle { a["subtitle"] = .string(s) }
        if let b = alert.body { a["body"] = .string(b) }
        o["alert"] = .object(a)
        if let threadID { o["thread-id"] = .string(threadID) }
        if let category { o["category"] = .string(category) }
        if let sound { o["sound"] = .string(sound) }
        if let badge { o["badge"] = .int(badge) }
        if let data { o["data"] = .object(data) }
        if let sender { o["sender"] = .string(sender.hex) }
        if let attachments { o["attachments"] = .array(attachments.map { .object($0.jsonObject) }) }
        if let receipt { o["receipt"] = .object(receipt.jsonObject) }
        if let reveal { o["reveal"] = .string(reveal) }
        return o
    }

    /// Reads and validates a body (wire format §4). Unknown members are ignored; anything else
    /// wrong is `malformedMessage`.
    public init(validating o: JSONObject) throws(OpenFailure) {
        func fail(_ why: String) -> OpenFailure { OpenFailure(.malformedMessage, why) }
        func optionalString(_ key: String) throws(OpenFailure) -> String? {
            guard let v = o[key] else { return nil }
            guard case let .string(s) = v else { throw fail("member '\(key)' must be a string") }
            return s
        }
        func keyID(_ key: String) throws(OpenFailure) -> KeyID? {
            guard let s = try optionalString(key) else { return nil }
            guard let id = KeyID(hex: s) else { throw fail("member '\(key)' must be 16 lowercase hex digits") }
            return id
        }
        guard let kid = try keyID("kid") else { throw fail("member 'kid' is required") }
        guard let id = try optionalString("id") else { throw fail("member 'id' is required") }
        // Counted in UTF-8 bytes, not characters: 64 grapheme clusters can be kilobytes (security review 2026-11).
        guard (1...64).contains(id.utf8.count) else { throw fail("member 'id' must be 1 to 64 bytes of UTF-8") }
        guard let iatValue = o["iat"] else { throw fail("member 'iat' is required") }
        guard case let .int(iat) = iatValue else { throw fail("member 'iat' must be an integer") }
        var exp: Int64?
        if let v = o["exp"] {
            guard case let .int(e) = v else { throw fail("member 'exp' must be an integer") }
            exp = e
        }
        guard let alertValue = o["alert"] else { throw fail("member 'alert' is required") }
        guard case let .object(alertObject) = alertValue else { throw fail("member 'alert' must be an object") }
        var alert = Alert()
        for (key, value) in alertObject {
            guard key == "title" || key == "subtitle" || key == "body" else { continue }
            guard case let .string(s) = value else { throw fail("alert member '\(key)' must be a string") }
            switch key {
            case "title": alert.title = s
            case "subtitle": alert.subtitle = s
            default: alert.body = s
            }
        }
        guard alert.hasVisibleText else { throw fail("alert needs a non-empty title, subtitle or body") }
        var badge: Int64?
        if let v = o["badge"] {
            guard case let .int(b) = v else { throw fail("member 'badge' must be an integer") }
            badge = b
        }
        var data: JSONObject?
        if let v = o["data"] {
            guard case let .object(d) = v else { throw fail("member 'data' must be an object") }
            guard d["aps"] == nil else { throw fail("member 'data' must not hold 'aps'") }
            data = d
        }
        var attachments: [AttachmentDescriptor]?
        if let v = o["attachments"] { attachments = try AttachmentDescriptor.validatingList(v) }
        var receipt: ReceiptRequest?
        if let v = o["receipt"] { receipt = try ReceiptRequest(validating: v) }
        let reveal = try optionalString("reveal")
        if let reveal, reveal.isEmpty { throw fail("member 'reveal' must not be empty") }
        self.init(kid: kid, id: id, issuedAt: iat, expiresAt: exp, alert: alert, threadID: try optionalString("thread-id"),
                  category: try optionalString("category"), sound: try optionalString("sound"), badge: badge, data: data,
                  sender: try keyID("sender"), attachments: attachments, receipt: receipt, reveal: reveal)
    }
}

/// A random default message id: 16 random bytes, base64url without padding.
public func makeMessageID() -> String {
    Base64.encodeURLSafeNoPadding(CryptoLibrary.randomIdentifierBytes(count: 16))
}

// MARK: - Codable for JSON values (so MessageBody.data round-trips through Codable too)

struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
}

extension JSONValue: Codable {
    /// Decodes any JSON value.
    public init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: AnyCodingKey.self) {
            var o = JSONObject()
            for key in keyed.allKeys { o[key.stringValue] = try keyed.decode(JSONValue.self, forKey: key) }
            self = .object(o)
            return
        }
        if var unkeyed = try? decoder.unkeyedContainer() {
            var a: [JSONValue] = []
            while !unkeyed.isAtEnd { a.append(try unkeyed.decode(JSONValue.self)) }
            self = .array(a)
            return
        }
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let i = try? c.decode(Int64.self) { self = .int(i) }
        else if let d = try? c.decode(Double.self) { self = .double(d) }
        else { self = .string(try c.decode(String.self)) }
    }

    /// Encodes any JSON value.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null: var c = encoder.singleValueContainer(); try c.encodeNil()
        case let .bool(b): var c = encoder.singleValueContainer(); try c.encode(b)
        case let .int(i): var c = encoder.singleValueContainer(); try c.encode(i)
        case let .double(d): var c = encoder.singleValueContainer(); try c.encode(d)
        case let .string(s): var c = encoder.singleValueContainer(); try c.encode(s)
        case let .array(a):
            var c = encoder.unkeyedContainer()
            for v in a { try c.encode(v) }
        case let .object(o):
            var c = encoder.container(keyedBy: AnyCodingKey.self)
            for (k, v) in o { try c.encode(v, forKey: AnyCodingKey(stringValue: k)) }
        }
    }
}

extension JSONObject: Codable {
    /// Decodes a JSON object.
    public init(from decoder: any Decoder) throws {
        guard case let .object(o) = try JSONValue(from: decoder) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "expected a JSON object"))
        }
        self = o
    }

    /// Encodes a JSON object.
    public func encode(to encoder: any Encoder) throws { try JSONValue.object(self).encode(to: encoder) }
}
