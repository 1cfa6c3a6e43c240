import SealedPushWebPush
import SealedPushWire
import SealedPushAPNsCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The id syntax of gateway v1 §4: 1–128 bytes of `[A-Za-z0-9._:@-]`, starting with a letter or digit.
enum IDSyntax {
    static func isValid(_ id: String) -> Bool {
        let b = Array(id.utf8)
        guard (1...128).contains(b.count) else { return false }
        for (i, c) in b.enumerated() {
            let alnum = (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39)
            if i == 0 ? !alnum : !(alnum || c == 0x2e || c == 0x5f || c == 0x3a || c == 0x40 || c == 0x2d) { return false }
        }
        return true
    }

    /// A device token: 64 to 200 hex digits, an even number of them (whole bytes), returned in lowercase.
    static func token(_ text: String) -> String? {
        let b = Array(text.utf8)
        guard (64...200).contains(b.count), b.count % 2 == 0, b.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) || ($0 >= 0x41 && $0 <= 0x46) })
        else { return nil }
        return text.lowercased()
    }
}

/// Reads one JSON object's members, refusing unknown ones and naming each member by its JSON pointer.
struct MemberReader {
    let object: JSONObject
    let pointer: String

    init(_ object: JSONObject, at pointer: String = "", allowed: Set<String>) throws(GatewayError) {
        self.object = object
        self.pointer = pointer
        for member in object where !allowed.contains(member.key) {
            throw GatewayError.unknownMember(pointer + "/" + Self.escape(member.key))
        }
    }

    static func escape(_ key: String) -> String {
        key.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
    }

    func field(_ name: String) -> String { pointer + "/" + name }

    func string(_ name: String, required: Bool = false, maxBytes: Int = 4096) throws(GatewayError) -> String? {
        switch object[name] {
        case nil, .null?:
            if required { throw GatewayError.invalidField(field(name), "\(name) is required: give a string") }
            return nil
        case let .string(s)?:
            guard s.utf8.count <= maxBytes else { throw GatewayError.invalidField(field(name), "\(name) is longer than \(maxBytes) bytes; shorten it") }
            return s
        default: throw GatewayError.invalidField(field(name), "\(name) must be a string")
        }
    }

    /// A string member of at most `maxCharacters` characters as JSON Schema's `maxLength` counts them (Unicode
    /// scalars), for text whose only byte limit is the sealed message's (a title in Greek is not half as long).
    func text(_ name: String, maxCharacters: Int) throws(GatewayError) -> String? {
        guard let s = try string(name, maxBytes: .max) else { return nil }
        guard s.unicodeScalars.count <= maxCharacters else {
            throw GatewayError.invalidField(field(name), "\(name) is longer than \(maxCharacters) characters; shorten it")
        }
        return s
    }

    /// An integer member: any JSON number whose value is an integer (`600`, `600.0`, `6e2`: JSON Schema's
    /// `integer`, which the OpenAPI document promises) within `range`.
    func integer(_ name: String, range: ClosedRange<Int64>) throws(GatewayError) -> Int64? {
        switch object[name] {
        case nil, .null?: return nil
        case let value?:
            guard let i = value.integralValue, range.contains(i) else {
                throw GatewayError.invalidField(field(name), "\(name) must be an integer from \(range.lowerBound) to \(range.upperBound)")
            }
            return i
        }
    }

    func bool(_ name: String) throws(GatewayError) -> Bool? {
        switch object[name] {
        case nil, .null?: return nil
        case let .bool(b)?: return b
        default: throw GatewayError.invalidField(field(name), "\(name) must be true or false")
        }
    }

    func id(_ name: String, required: Bool) throws(GatewayError) -> String? {
        guard let s = try string(name, required: required, maxBytes: 128) else { return nil }
        guard IDSyntax.isValid(s) else {
            throw GatewayError.invalidField(field(name), "\(name) must be 1–128 characters of A–Z a–z 0–9 . _ : @ -, starting with a letter or digit")
        }
        return s
    }

    func idList(_ name: String) throws(GatewayError) -> [String]? {
        guard let value = object[name], value != .null else { return nil }
        guard case let .array(items) = value, (1...1000).contains(items.count) else {
            throw GatewayError.invalidField(field(name), "\(name) must be an array of 1 to 1000 ids")
        }
        var out: [String] = []
        for (n, item) in items.enumerated() {
            guard let s = item.stringValue, IDSyntax.isValid(s) else {
                throw GatewayError.invalidField(field(name) + "/\(n)", "each id must be 1–128 characters of A–Z a–z 0–9 . _ : @ -, starting with a letter or digit")
            }
            out.append(s)
        }
        return out
    }
}

/// A checked `PUT /v1/apps/{app}/devices/{device_id}` body (gateway v1 §4, platforms v1 §1): the members of its
/// platform and no other's.
struct DeviceRegistration {
    var userID: String
    var platform: PushPlatform
    /// The address: the APNs token (lowercase hex), the FCM registration token, or the Web Push endpoint.
    var token: String
    /// APNs's environment (`production` for the other platforms).
    var environment: APNsEnvironmentName
    /// A webpush subscription's keys.
    var webpushKeys: StoredWebPushKeys?
    var keyRecord: JSONObject
    var record: DeviceKeyRecord

    /// The members each platform's registration has besides `user_id`, `platform` and `key_record`.
    static let platformMembers: [PushPlatform: Set<String>] = [
        .apns: ["apns_token", "environment"], .fcm: ["fcm_token"], .webpush: ["webpush"],
    ]

    /// Reads a registration; a `webpush` endpoint is checked by `webpushPolicy` (its syntax, host and port: the
    /// addresses it resolves to are checked by the caller).
    init(_ body: JSONObject, webpushPolicy: WebPushEndpointPolicy = WebPushEndpointPolicy()) throws(GatewayError) {
        let r = try MemberReader(body, allowed: ["user_id", "platform", "apns_token", "environment", "fcm_token", "webpush", "key_record"])
        userID = try r.id("user_id", required: true)!
        // The document says a string (absent: apns); null is not a platform (#44 pilot 7: it was taken as apns).
        if case .null? = body["platform"] {
            throw GatewayError.invalidField("/platform", "platform must be \"apns\", \"fcm\" or \"webpush\", not null; leave it out for an APNs device")
        }
        guard let platform = PushPlatform(rawValue: try r.string("platform") ?? "apns") else {
            throw GatewayError.invalidField("/platform", "platform must be \"apns\" (the default), \"fcm\" or \"webpush\"")
        }
        self.platform = platform
        let own = Self.platformMembers[platform] ?? []
        for member in ["apns_token", "environment", "fcm_token", "webpush"] where !own.contains(member) && body[member] != nil {
            throw GatewayError.invalidField("/" + member, "\(member) belongs to another platform than \(platform.rawValue); remove it, or set platform to the device's")
        }
        environment = .production
        switch platform {
        case .apns:
            guard let token = IDSyntax.token(try r.string("apns_token", required: true)!) else {
                throw GatewayError.invalidField("/apns_token", "apns_token must be the device token as 64 to 200 hex digits, an even number (whole bytes)")
            }
            self.token = token
            guard let env = APNsEnvironmentName(rawValue: try r.string("environment", required: true)!) else {
                throw GatewayError.invalidField("/environment", "environment must be \"production\" or \"sandbox\" (apps built for development use sandbox)")
            }
            environment = env
        case .fcm:
            let token = try r.string("fcm_token", required: true)!
            guard Self.isFCMToken(token) else {
                throw GatewayError.invalidField("/fcm_token", "fcm_token must be the FCM registration token the app got from FirebaseMessaging.getToken(): 1 to 4096 of A-Z a-z 0-9 _ : . -")
            }
            self.token = token
        case .webpush:
            // The browser's PushSubscription.toJSON(), its endpoint through the app's endpoint rules (platforms v1 §1.1).
            let subscription: WebPushSubscription
            do { subscription = try WebPushSubscription(json: body["webpush"] ?? .null, policy: webpushPolicy) } catch {
                throw Self.webPushProblem(error)
            }
            token = subscription.endpoint.url
            webpushKeys = StoredWebPushKeys(p256dh: subscription.keys.p256dh, auth: subscription.keys.authBase64URL)
        }
        guard case let .object(record)? = body["key_record"] else {
            throw GatewayError.invalidField("/key_record", "key_record is required: give the device's exported sealedpush-device-key record (an object)")
        }
        do { self.record = try DeviceKeyRecord(json: record) } catch {
            throw Self.recordProblem(error)
        }
        keyRecord = record
    }

    /// Whether `token` has an FCM registration token's syntax (platforms v1 §1): 1–4096 of `[A-Za-z0-9_:.-]`.
    static func isFCMToken(_ token: String) -> Bool {
        let b = token.utf8
        return (1...4096).contains(b.count) && b.allSatisfy { c in
            (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c == 0x5f || c == 0x3a || c == 0x2e || c == 0x2d
        }
    }

    /// A Web Push refusal as the problem it answers: `400 invalid_field` at the member it names (never quoting the
    /// endpoint's path or a key).
    static func webPushProblem(_ error: WebPushError) -> GatewayError {
        switch error {
        case let .subscription(member, _): GatewayError.invalidField("/" + member, error.description)
        case .endpoint: GatewayError.invalidField("/webpush/endpoint", error.description)
        default: GatewayError.invalidField("/webpush", error.description)
        }
    }
}

extension DeviceRegistration {
    /// The problem for a key record that does not read: the member that is wrong, by its JSON pointer, and what to
    /// do. Never quotes the record's values.
    static func recordProblem(_ error: KeyRecordError) -> GatewayError {
        let again = "export the record again from the device"
        switch error {
        case .notJSON:
            return GatewayError.invalidField("/key_record", "key_record must be the device's sealedpush-device-key record, an object; \(again)")
        case .wrongType:
            return GatewayError.invalidField("/key_record/type", "key_record.type must be \"sealedpush-device-key\"; \(again)")
        case .unsupportedVersion:
            return GatewayError.invalidField("/key_record/version", "key_record.version must be 1; \(again)")
        case let .invalidMember(member):
            let pointer = "/key_record/" + member.split(separator: ".").joined(separator: "/")
            let why = member == "created_at"
                ? "key_record.created_at must be an RFC 3339 date-time (2026-11-27T16:27:13Z or with an offset, +00:00)"
                : "key_record.\(member) is missing or not of its type"
            return GatewayError.invalidField(pointer, "\(why); \(again)")
        case .keyIDMismatch:
            return GatewayError.invalidField("/key_record/key_id", "key_record.key_id is not the id of key_record.public_key; \(again)")
        case .revealKeyIDMismatch:
            return GatewayError.invalidField("/key_record/reveal/key_id",
                                        "key_record.reveal.key_id is not the id of key_record.reveal.public_key; \(again)")
        }
    }
}

/// Who a message goes to.
enum Recipients: Equatable {
    case user(String)
    case users([String])
    case devices([String])
}

/// A checked `POST /v1/apps/{app}/messages` body.
struct MessageRequest {
    var to: Recipients
    var title: String?
    var subtitle: String?
    var body: String
    var threadID: String?
    var category: String?
    var badge: Int64?
    var sound: String?
    var data: JSONObject?
    var ttl: Int64
    var collapseID: String?
    var priority: Int
    var receipt: Bool
    /// A reveal message (reveal v1 §8): the text sealed again to each device's reveal key; devices without one are skipped.
    var reveal: Bool
    /// `"push"` or `"mailbox"` when the message names its mode (mailbox v1 §1); nil: the app's default.
    var delivery: DeliveryMode?

    /// The longest `ttl` accepted: 30 days (APNs stores a push for a limited time).
    static let maximumTTL: Int64 = 30 * 86_400

    init(_ o: JSONObject) throws(GatewayError) {
        let r = try MemberReader(o, allowed: ["to", "title", "subtitle", "body", "thread_id", "category", "badge", "sound", "data",
                                              "ttl", "collapse_id", "priority", "receipt", "reveal", "delivery"])
        guard case let .object(toObject)? = o["to"] else {
            throw GatewayError.invalidField("/to", "to is required: {\"user_id\": …}, {\"user_ids\": […]} or {\"device_ids\": […]}")
        }
        let t = try MemberReader(toObject, at: "/to", allowed: ["user_id", "user_ids", "device_ids"])
        guard toObject.count == 1 else {
            throw GatewayError.invalidField("/to", "to must have exactly one of user_id, user_ids, device_ids")
        }
        if let user = try t.id("user_id", required: false) { to = .user(user) }
        else if let users = try t.idList("user_ids") { to = .users(users) }
        else if let devices = try t.idList("device_ids") { to = .devices(devices) }
        else { throw GatewayError.invalidField("/to", "to must have exactly one of user_id, user_ids, device_ids") }
        // Counted in characters, as the document's maxLength (gateway v1 leaves them to the sealed size: 413 beyond).
        title = try r.text("title", maxCharacters: 4096)
        subtitle = try r.text("subtitle", maxCharacters: 4096)
        body = try r.string("body", required: true, maxBytes: 64 * 1024)!  // too long to seal is 413 with the size that fits
        threadID = try r.text("thread_id", maxCharacters: 256)
        category = try r.text("category", maxCharacters: 256)
        badge = try r.integer("badge", range: 0...Int64(Int32.max))
        sound = try r.text("sound", maxCharacters: 256)
        switch o["data"] {
        case nil, .null?: data = nil
        case let .object(d)?:
            guard d["aps"] == nil else { throw GatewayError.invalidField("/data/aps", "data may not hold aps; it is reserved for Apple") }
            data = d
        default: throw GatewayError.invalidField("/data", "data must be an object")
        }
        ttl = try r.integer("ttl", range: 0...Self.maximumTTL) ?? 7 * 86_400
        collapseID = try r.string("collapse_id", maxBytes: 64)
        if let collapseID, collapseID.isEmpty || collapseID.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f }) {
            throw GatewayError.invalidField("/collapse_id", "collapse_id must be 1 to 64 bytes without control characters")
        }
        switch try r.integer("priority", range: 1...10) {
        case nil: priority = 10
        case let p? where p == 10 || p == 5: priority = Int(p)
        default: throw GatewayError.invalidField("/priority", "priority must be 10 (now) or 5 (when the device saves power)")
        }
        receipt = try r.bool("receipt") ?? true
        reveal = try r.bool("reveal") ?? false
        switch o["delivery"] {
        case nil, .null?: delivery = nil
        case let .string(s)? where DeliveryMode(rawValue: s) != nil: delivery = DeliveryMode(rawValue: s)
        default: throw GatewayError.invalidField("/delivery", "delivery must be \"push\" (the message rides in the push) or \"mailbox\" (the push carries a handle)")
        }
    }
}
