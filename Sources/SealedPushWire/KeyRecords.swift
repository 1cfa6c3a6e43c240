public import SealedPushCrypto
public import Foundation

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

    /// What happened and what to do.
    public var description: String {
        switch self {
        case let .notJSON(why): return "the key record is not a JSON object (\(why)); pass the file `keys export` printed"
        case let .wrongType(expected): return "the key record's \"type\" must be \"\(expected)\"; check you passed the right kind of record"
        case .unsupportedVersion: return "the key record's \"version\" must be 1; re-export it with this version of SealedPush"
        case let .invalidMember(name): return "the key record's \"\(name)\" is missing or malformed; re-export the record"
        case let .keyIDMismatch(recorded, derived):
            return "the key record says key_id \(recorded) but its public key has id \(derived); the record was altered or corrupted, re-export it"
        }
    }
}

/// Formats and parses the ISO 8601 UTC timestamps used in records (`2026-11-21T12:00:00Z`).
public enum Timestamp {
    /// `2026-11-21T12:00:00Z` for `date` (whole seconds, UTC).
    public static func format(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!))
    }

    /// Parses an ISO 8601 UTC timestamp, with or without fractional seconds.
    public static func parse(_ text: String) -> Date? {
        if let d = try? Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!).parse(text) { return d }
        return try? Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!).parse(text)
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

private func recordKey(_ o: JSONObject) throws(KeyRecordError) -> (KeyID, [UInt8]) {
    guard let kidText = o["key_id"]?.stringValue, let kid = KeyID(hex: kidText) else { throw .invalidMember("key_id") }
    guard let pkText = o["public_key"]?.stringValue, let pk = try? Base64.decode(pkText), pk.count == 32 else {
        throw .invalidMember("public_key")
    }
    let derived = KeyID(publicKey: pk)
    guard derived == kid else { throw .keyIDMismatch(recorded: kid.hex, derived: derived.hex) }
    return (kid, pk)
}

/// A device's public key as registered with the server (`sealedpush-device-key`).
public struct DeviceKeyRecord: Sendable, Equatable {
    /// The record type string.
    public static let type = "sealedpush-device-key"
    /// The device's X25519 public key.
    public let publicKey: BoxPublicKey
    /// When the key was created, if known.
    public let createdAt: Date?

    /// The key id, derived from the public key.
    public var keyID: KeyID { publicKey.keyID }

    /// A record for `publicKey`.
    public init(publicKey: BoxPublicKey, createdAt: Date?) {
        self.publicKey = publicKey
        self.createdAt = createdAt.map { Date(timeIntervalSince1970: $0.timeIntervalSince1970.rounded(.down)) }
    }

    /// Parses and verifies a record: type, version, key id against the public key.
    public init(jsonBytes: [UInt8]) throws(KeyRecordError) {
        try self.init(json: try recordObject(jsonBytes, type: Self.type))
    }

    /// Verifies a record given as a parsed JSON object.
    public init(json o: JSONObject) throws(KeyRecordError) {
        _ = try recordObject(o, type: Self.type)
        let (_, pk) = try recordKey(o)
        var created: Date?
        if let v = o["created_at"] {
            guard let s = v.stringValue, let d = Timestamp.parse(s) else { throw .invalidMember("created_at") }
            created = d
        }
        publicKey = try! BoxPublicKey(bytes: pk)  // 32 bytes checked by recordKey
        createdAt = created
    }

    /// The record as a JSON object, in the spec's member order.
    public var jsonObject: JSONObject {
        var o = JSONObject([("type", .string(Self.type)), ("version", .int(1)), ("key_id", .string(keyID.hex)),
                            ("public_key", .string(Base64.encode(publicKey.bytes)))])
        if let createdAt { o["created_at"] = .string(Timestamp.format(createdAt)) }
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
