import SealedPushCrypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The `apns-push-type` values APNs accepts.
public enum APNsPushType: String, Sendable, CaseIterable {
    /// A visible alert (what a sealed secret message is).
    case alert
    /// A background content update.
    case background
    /// A location query.
    case location
    /// A VoIP call.
    case voip
    /// A watch complication update.
    case complication
    /// A File Provider change.
    case fileprovider
    /// A device management ping.
    case mdm
    /// A Live Activity update.
    case liveactivity
    /// A push-to-talk update.
    case pushtotalk
}

/// One push as APNs receives it: the path's device token, the `apns-*` headers and the payload bytes.
public struct APNsPush: Sendable, Equatable {
    /// The device token, hexadecimal (64 digits for today's devices).
    public var deviceToken: String
    /// The payload, sent byte for byte as given (never re-encoded).
    public var payload: [UInt8]
    /// `apns-push-type`.
    public var pushType: APNsPushType
    /// `apns-priority`: 10 (immediately), 5 (power considerations) or 1 (lowest).
    public var priority: Int
    /// `apns-topic`: the app's bundle id (required with token authentication).
    public var topic: String
    /// `apns-expiration`: Unix seconds until which APNs stores and retries the push; `0` delivers once.
    public var expiration: Int64
    /// `apns-collapse-id` (at most 64 bytes), when given.
    public var collapseID: String?
    /// `apns-id`: a lowercase UUID identifying the push; generated when not given.
    public var apnsID: String

    /// A push; `apnsID` defaults to a new random UUID.
    public init(deviceToken: String, payload: [UInt8], pushType: APNsPushType = .alert, priority: Int = 10,
                topic: String, expiration: Int64, collapseID: String? = nil, apnsID: String? = nil) {
        self.deviceToken = deviceToken
        self.payload = payload
        self.pushType = pushType
        self.priority = priority
        self.topic = topic
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID ?? APNsID.random()
    }

    /// The largest payload APNs takes for an alert.
    public static let maximumPayloadSize = 4096

    /// The request path, `/3/device/<token>`.
    public var path: String { "/3/device/" + deviceToken }

    /// The `apns-*` headers in a fixed order (without `authorization`).
    public var headers: [(name: String, value: String)] {
        var out: [(name: String, value: String)] = [
            ("apns-push-type", pushType.rawValue), ("apns-priority", String(priority)), ("apns-topic", topic),
            ("apns-expiration", String(expiration)), ("apns-id", apnsID),
        ]
        if let collapseID { out.append(("apns-collapse-id", collapseID)) }
        return out
    }

    /// Why APNs would refuse this push's own fields, or `nil` when they are well formed (checked before sending).
    public var problem: String? {
        if !APNsPush.isValidDeviceToken(deviceToken) {
            return "the device token must be 64 hexadecimal digits (the token the app got from APNs); got \(deviceToken.utf8.count) characters"
        }
        if let problem = APNsHeaderRules.topicProblem(topic) { return "the topic (the app's bundle id) \(problem)" }
        if payload.isEmpty { return "the payload is empty" }
        if payload.count > APNsPush.maximumPayloadSize {
            return "the payload is \(payload.count) bytes, over APNs's limit of \(APNsPush.maximumPayloadSize)"
        }
        if ![1, 5, 10].contains(priority) { return "the priority must be 10, 5 or 1; it was \(priority)" }
        if expiration < 0 { return "the expiration must be 0 or Unix seconds; it was \(expiration)" }
        if let collapseID, let problem = APNsHeaderRules.collapseIDProblem(collapseID) { return "the collapse id \(problem)" }
        if !APNsPush.isValidAPNsID(apnsID) { return "the apns-id must be a UUID (8-4-4-4-12 hexadecimal digits)" }
        return nil
    }

    /// A device token is 64 hexadecimal digits (either case).
    public static func isValidDeviceToken(_ token: String) -> Bool {
        token.utf8.count == 64 && token.utf8.allSatisfy(isHexDigit)
    }

    /// An `apns-id` is a UUID in its canonical 8-4-4-4-12 form (either case).
    public static func isValidAPNsID(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard bytes.count == 36 else { return false }
        for (i, b) in bytes.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if b != UInt8(ascii: "-") { return false }
            } else if !isHexDigit(b) {
                return false
            }
        }
        return true
    }

    static func isHexDigit(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)
    }
}

/// APNs accepted a push.
public struct APNsAcceptance: Sendable, Equatable {
    /// The `apns-id` APNs echoed (the one sent, or the one it assigned).
    public let apnsID: String
    /// `apns-unique-id`: APNs's own id for the push (development environment only), when given.
    public let uniqueID: String?
    /// How many tries it took (1 when the first was accepted).
    public let tries: Int

    /// An acceptance from its parts.
    public init(apnsID: String, uniqueID: String?, tries: Int) {
        self.apnsID = apnsID
        self.uniqueID = uniqueID
        self.tries = tries
    }
}

/// `apns-id` values: random (version 4) UUIDs in APNs's lowercase form.
public enum APNsID {
    /// A new random lowercase UUID, e.g. `"5f0c3a1e-8b2d-4c7e-9a41-0e6f2d3b4c5a"`.
    ///
    /// Made from `CryptoLibrary.randomIdentifierBytes` (libsodium's generator, read 4 KiB at a time):
    /// Foundation's `UUID()` on Linux opens, reads and closes `/dev/urandom` for each one, and the system
    /// generator makes a `getrandom` call per 8 bytes, costs every push paid. An `apns-id` is not a secret;
    /// it only has to be unique.
    public static func random() -> String {
        let bytes = CryptoLibrary.randomIdentifierBytes(count: 16)
        var high: UInt64 = 0, low: UInt64 = 0
        for i in 0..<8 {
            high = high << 8 | UInt64(bytes[i])
            low = low << 8 | UInt64(bytes[8 + i])
        }
        // Version 4 (bits 76–79 = 0100) and the RFC 9562 variant (bits 62–63 = 10).
        let a = (high & ~0xF000) | 0x4000
        let b = (low & ~(0xC000 << 48)) | (0x8000 << 48)
        var text = [UInt8]()
        text.reserveCapacity(36)
        func hex(_ value: UInt64, digits: Int) {
            var shift = (digits - 1) * 4
            while shift >= 0 {
                text.append(hexDigits[Int((value >> UInt64(shift)) & 0xF)])
                shift -= 4
            }
        }
        hex(a >> 32, digits: 8)
        text.append(0x2D)
        hex((a >> 16) & 0xFFFF, digits: 4)
        text.append(0x2D)
        hex(a & 0xFFFF, digits: 4)
        text.append(0x2D)
        hex(b >> 48, digits: 4)
        text.append(0x2D)
        hex(b & 0xFFFF_FFFF_FFFF, digits: 12)
        return String(decoding: text, as: UTF8.self)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
