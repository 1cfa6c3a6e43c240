public import SealedPushCrypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Why a key record (wire format §6) was refused.
public enum KeyRecordError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The input is not a JSON object.
    case notJSON(String)
    /// `type` is missing or not the expected record type.
    case wrongType(expected: String)
    /// `version` is not 1.
    case unsupportedVersion
    /// A required member is missing or has the wrong type.
    case invalidMember(String)
    /// `key_id` does not match the id derived from `public_key`.
    case keyIDMismatch(recorded: String, derived: String)
    /// `reveal.key_id` does not match the id derived from `reveal.public_key` (reveal v1 §1).
    case revealKeyIDMismatch(recorded: String, derived: String)

    /// What happened and what to do.
    public var description: String {
        switch self {
        case let .notJSON(why):
            return "the key record is not a JSON object (\(why)); pass the record a keyring's export produced"
        case let .wrongType(expected): return "the key record's \"type\" must be \"\(expected)\"; check you passed the right kind of record"
        case .unsupportedVersion: return "the key record's \"version\" must be 1; re-export it with this version of SealedPush"
        case let .invalidMember(name): return "the key record's \"\(name)\" is missing or malformed; re-export the record"
        case let .keyIDMismatch(recorded, derived):
            return "the key record says key_id \(recorded) but its public key has id \(derived); the record was altered or corrupted, re-export it"
        case let .revealKeyIDMismatch(recorded, derived):
            return "the key record's reveal member says key_id \(recorded) but its public key has id \(derived); the record was altered or corrupted, re-export it"
        }
    }
}

/// Formats the ISO 8601 UTC timestamps used in records (`2026-11-21T12:00:00Z`) and parses RFC 3339 date-times.
public enum Timestamp {
    /// `2026-11-21T12:00:00Z` for `date` (whole seconds, rounded down, UTC; years 0000–9999, clamped).
    public static func format(_ date: Date) -> String {
        let limit = 253_402_300_799.0  // 9999-12-31T23:59:59Z
        let seconds = Int64(max(-62_167_219_200, min(limit, date.timeIntervalSince1970.rounded(.down))))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        var out = ""
        out.reserveCapacity(20)
        func two(_ v: Int64) { if v < 10 { out.append("0") }; out.append(String(v)) }
        let y = String(year)
        out.append(String(repeating: "0", count: max(0, 4 - y.count)) + y)
        out.append("-"); two(month); out.append("-"); two(day)
        out.append("T"); two(secondOfDay / 3600); out.append(":"); two(secondOfDay / 60 % 60); out.append(":"); two(secondOfDay % 60)
        out.append("Z")
        return out
    }

    /// Parses an RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS`, optionally 1–9 fractional digits, then `Z` or a
    /// numeric offset `±HH:MM` (`2026-11-21T12:00:00Z`, `2026-11-21T12:00:00.250Z`, `2026-11-27T16:27:13+00:00`,
    /// `2026-11-27T18:27:13+02:00`); `T` and `Z` may be lowercase (RFC 3339 §5.6). The date must exist (leap years
    /// included), years 0000–9999, offsets at most 23:59. Anything else (a space for `T`, a missing offset, a
    /// five-digit year) is `nil`. Fixed-format arithmetic: no locale, calendar or ICU data is loaded.
    public static func parse(_ text: String) -> Date? {
        let b = Array(text.utf8)
        func isT(_ c: UInt8) -> Bool { c == UInt8(ascii: "T") || c == UInt8(ascii: "t") }
        guard b.count >= 20, b.count <= 35, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), isT(b[10]),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":") else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            guard !range.isEmpty, range.upperBound <= b.count else { return nil }
            var value: Int64 = 0
            for i in range {
                guard b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(b[i] - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour <= 23, minute <= 59, second <= 59 else { return nil }
        // The fraction: "." and 1 to 9 digits.
        var index = 19
        var fraction = 0.0
        if b[index] == UInt8(ascii: ".") {
            var end = index + 1
            while end < b.count, b[end] >= UInt8(ascii: "0"), b[end] <= UInt8(ascii: "9") { end += 1 }
            guard (1...9).contains(end - index - 1), let digits = number((index + 1)..<end) else { return nil }
            var scale = 1.0
            for _ in (index + 1)..<end { scale *= 10 }
            fraction = Double(digits) / scale
            index = end
        }
        // The offset: "Z" (or "z"), or "+HH:MM" / "-HH:MM" (local time = UTC + offset).
        guard index < b.count else { return nil }
        var offset: Int64 = 0
        switch b[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard index + 1 == b.count else { return nil }
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard index + 6 == b.count, b[index + 3] == UInt8(ascii: ":"), let hours = number((index + 1)..<(index + 3)),
                  let minutes = number((index + 4)..<(index + 6)), hours <= 23, minutes <= 59 else { return nil }
            offset = (hours * 3600 + minutes * 60) * (b[index] == UInt8(ascii: "-") ? -1 : 1)
        default:
            return nil
        }
        let seconds = days(fromYear: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    private static func isLeap(_ y: Int64) -> Bool { y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    static func days(fromYear year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (`civil_from_days`).
    static func civil(fromDays z0: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

private func recordObject(_ bytes: [UInt8], type: String) throws(KeyRecordError) -> JSONObject {
    let value: JSONValue
    do { value = try JSON.parse(bytes) } catch { throw .notJSON(error.description) }
    guard case let .object(o) = value else { throw .notJSON("it is not an object") }
    return try recordObject(o, type: type)
}

private func recordObject(_ o: JSONObject, type: String) throws(KeyRecordError) -> JSONObject {
    guard o["type"]?.stringValue == type else { throw .wrongType(expected: type) }
    guard o["version"]?.intValue == 1 else { throw .unsupportedVersion }
    return o
}

private func recordKey(_ o: JSONObject, member prefix: String = "") throws(KeyRecordError) -> (KeyID, [UInt8]) {
    guard let kidText = o["key_id"]?.stringValue, let kid = KeyID(hex: kidText) else { throw .invalidMember(prefix + "key_id") }
    guard let pkText = o["public_key"]?.stringValue, let pk = try? Base64.decodePublic(pkText), pk.count == 32 else {
        throw .invalidMember(prefix + "public_key")
    }
    let derived = KeyID(publicKey: pk)
    guard derived == kid else {
        if prefix.isEmpty { throw .keyIDMismatch(recorded: kid.hex, derived: derived.hex) }
        throw .revealKeyIDMismatch(recorded: kid.hex, derived: derived.hex)
    }
    return (kid, pk)
}

/// A device's reveal key as its device key record carries it (reveal v1 §1): the `reveal` member,
/// `{"key_id", "public_key"}`. Reveal messages seal their text to it.
public struct RevealKeyRecord: Sendable, Equatable {
    /// The reveal key's X25519 public key.
    public let publicKey: BoxPublicKey

    /// The reveal key id, derived from the public key.
    public var keyID: KeyID { publicKey.keyID }

    /// A record for `publicKey`.
    public init(publicKey: BoxPublicKey) { self.publicKey = publicKey }

    /// Verifies a `reveal` member: both members present, 32 bytes of key, `key_id` recomputed from
    /// `public_key` (a difference is `revealKeyIDMismatch`).
    public init(json o: JSONObject) throws(KeyRecordError) {
        let (_, pk) = try recordKey(o, member: "reveal.")
        publicKey = try! BoxPublicKey(bytes: pk)  // 32 bytes checked by recordKey
    }

    /// The member as a JSON object: `{"key_id", "public_key"}`.
    public var jsonObject: JSONObject {
        JSONObject([("key_id", .string(keyID.hex)), ("public_key", .string(Base64.encode(publicKey.bytes)))])
    }
}

/// A device's public key as registered with the server (`sealedpush-device-key`).
public struct DeviceKeyRecord: Sendable, Equatable {
    /// The record type string.
    public static let type = "sealedpush-device-key"
    /// The device's X25519 public key.
    public let publicKey: BoxPublicKey
    /// When the key was created, if known.
    public let createdAt: Date?
    /// The device's reveal key (reveal v1 §1), or `nil`: a device without one cannot receive reveal messages.
    public let reveal: RevealKeyRecord?

    /// The key id, derived from the public key.
    public var keyID: KeyID { publicKey.keyID }

    /// A record for `publicKey`, with the device's reveal key when it has one.
    public init(publicKey: BoxPublicKey, createdAt: Date?, reveal: RevealKeyRecord? = nil) {
        self.publicKey = publicKey
        self.createdAt = createdAt.map { Date(timeIntervalSince1970: $0.timeIntervalSince1970.rounded(.down)) }
        self.reveal = reveal
    }

    /// This record with `reveal` as its reveal key (`nil` removes it).
    public func withReveal(_ reveal: RevealKeyRecord?) -> DeviceKeyRecord {
        DeviceKeyRecord(publicKey: publicKey, createdAt: createdAt, reveal: reveal)
    }

    /// Parses and verifies a record: type, version, key id against the public key.
    public init(jsonBytes: [UInt8]) throws(KeyRecordError) {
        try self.init(json: try recordObject(jsonBytes, type: Self.type))
    }

    /// Verifies a record given as a parsed JSON object; an optional `reveal` member is verified as
    /// the device key is (its `key_id` recomputed from its `public_key`).
    public init(json o: JSONObject) throws(KeyRecordError) {
        _ = try recordObject(o, type: Self.type)
        let (_, pk) = try recordKey(o)
        var created: Date?
        if let v = o["created_at"] {
            guard let s = v.stringValue, let d = Timestamp.parse(s) else { throw .invalidMember("created_at") }
            created = d
        }
        var reveal: RevealKeyRecord?
        if let v = o["reveal"] {
            guard case let .object(member) = v else { throw .invalidMember("reveal") }
            reveal = try RevealKeyRecord(json: member)
        }
        publicKey = try! BoxPublicKey(bytes: pk)  // 32 bytes checked by recordKey
        createdAt = created
        self.reveal = reveal
    }

    /// The record as a JSON object, in the spec's member order (`reveal` last, when present).
    public var jsonObject: JSONObject {
        var o = JSONObject([("type", .string(Self.type)), ("version", .int(1)), ("key_id", .string(keyID.hex)),
                            ("public_key", .string(Base64.encode(publicKey.bytes)))])
        if let createdAt { o["created_at"] = .string(Timestamp.format(createdAt)) }
        if let reveal { o["reveal"] = .object(reveal.jsonObject) }
        return o
    }

    /// Compact JSON bytes of the record.
    public var jsonBytes: [UInt8] { JSON.serialize(.object(jsonObject)) }
}

/// A sender's Ed25519 signing public key as distributed to devices (`sealedpush-sender-key`).
public struct SenderKeyRecord: Sendable, Equatable {
    /// The record type string.
    public static let type = "sealedpush-sender-key"
    /// The sender's Ed25519 public key.
    public let publicKey: SigningPublicKey

    /// The sender key id, derived from the public key.
    public var keyID: KeyID { publicKey.keyID }

    /// A record for `publicKey`.
    public init(publicKey: SigningPublicKey) { self.publicKey = publicKey }

    /// Parses and verifies a record: type, version, key id against the public key.
    public init(jsonBytes: [UInt8]) throws(KeyRecordError) {
        try self.init(json: try recordObject(jsonBytes, type: Self.type))
    }

    /// Verifies a record given as a parsed JSON object.
    public init(json o: JSONObject) throws(KeyRecordError) {
        _ = try recordObject(o, type: Self.type)
        let (_, pk) = try recordKey(o)
        publicKey = try! SigningPublicKey(bytes: pk)  // 32 bytes checked by recordKey
    }

    /// The record as a JSON object.
    public var jsonObject: JSONObject {
        JSONObject([("type", .string(Self.type)), ("version", .int(1)), ("key_id", .string(keyID.hex)),
                    ("public_key", .string(Base64.encode(publicKey.bytes)))])
    }

    /// Compact JSON bytes of the record.
    public var jsonBytes: [UInt8] { JSON.serialize(.object(jsonObject)) }
}

/// The member names of a key record (wire format §6).
private enum KeyRecordCodingKeys: String, CodingKey {
    case type, version, keyID = "key_id", publicKey = "public_key", createdAt = "created_at", reveal
}

/// The member names of a record's `reveal` member (reveal v1 §1).
private enum RevealCodingKeys: String, CodingKey {
    case keyID = "key_id", publicKey = "public_key"
}

extension KeyRecordError {
    /// The `DecodingError` a `Decodable` initializer reports for this refusal.
    func decodingError(_ decoder: any Decoder) -> DecodingError {
        .dataCorrupted(DecodingError.Context(codingPath: decoder.codingPath, debugDescription: description, underlyingError: self))
    }
}

/// Decodes a record's members into the JSON object `init(json:)` verifies, so a record decoded by a
/// `Decoder` (a Vapor or Hummingbird request body) passes exactly the checks of `init(jsonBytes:)`.
private func recordJSON(from decoder: any Decoder, withCreatedAt: Bool) throws -> JSONObject {
    let c = try decoder.container(keyedBy: KeyRecordCodingKeys.self)
    var o = JSONObject()
    o["type"] = .string(try c.decode(String.self, forKey: .type))
    o["version"] = .int(try c.decode(Int64.self, forKey: .version))
    o["key_id"] = .string(try c.decode(String.self, forKey: .keyID))
    o["public_key"] = .string(try c.decode(String.self, forKey: .publicKey))
    if withCreatedAt, let created = try c.decodeIfPresent(String.self, forKey: .createdAt) { o["created_at"] = .string(created) }
    if withCreatedAt, c.contains(.reveal) {
        let r = try c.nestedContainer(keyedBy: RevealCodingKeys.self, forKey: .reveal)
        o["reveal"] = .object(JSONObject([("key_id", .string(try r.decode(String.self, forKey: .keyID))),
                                          ("public_key", .string(try r.decode(String.self, forKey: .publicKey)))]))
    }
    return o
}

private func encodeRecord(_ o: JSONObject, to encoder: any Encoder) throws {
    var c = encoder.container(keyedBy: KeyRecordCodingKeys.self)
    for (key, value) in o {
        guard let codingKey = KeyRecordCodingKeys(rawValue: key) else { continue }
        switch value {
        case let .string(s): try c.encode(s, forKey: codingKey)
        case let .int(i): try c.encode(i, forKey: codingKey)
        case let .object(member):
            var r = c.nestedContainer(keyedBy: RevealCodingKeys.self, forKey: codingKey)
            for (k, v) in member {
                guard let rk = RevealCodingKeys(rawValue: k), case let .string(text) = v else { continue }
                try r.encode(text, forKey: rk)
            }
        default: continue
        }
    }
}

extension DeviceKeyRecord: Codable {
    /// Decodes and verifies a record (type, version, key id against the public key, `created_at`, `reveal`).
    public init(from decoder: any Decoder) throws {
        let o = try recordJSON(from: decoder, withCreatedAt: true)
        do { try self.init(json: o) } catch { throw error.decodingError(decoder) }
    }

    /// Encodes the record's members as wire format §6 names them.
    public func encode(to encoder: any Encoder) throws { try encodeRecord(jsonObject, to: encoder) }
}

extension SenderKeyRecord: Codable {
    /// Decodes and verifies a record (type, version, key id against the public key).
    public init(from decoder: any Decoder) throws {
        let o = try recordJSON(from: decoder, withCreatedAt: false)
        do { try self.init(json: o) } catch { throw error.decodingError(decoder) }
    }

    /// Encodes the record's members as wire format §6 names them.
    public func encode(to encoder: any Encoder) throws { try encodeRecord(jsonObject, to: encoder) }
}
