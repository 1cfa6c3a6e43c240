public import SealedPushWire
import SealedPushAPNsCore
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The visible part of every sealed notification: what the device shows if the extension cannot decrypt.
///
/// Nothing here may be secret: it travels in clear through APNs.
public struct Placeholder: Sendable, Equatable {
    /// The visible title (default `Secret Message!`); `nil` omits it.
    public let title: String?
    /// The visible body (default `(Encrypted)`).
    public let body: String
    /// The visible `aps.category` (default `SECRET`); `nil` omits it.
    public let category: String?

    /// The default visible title.
    public static let defaultTitle = "Secret Message!"
    /// The default visible body.
    public static let defaultBody = "(Encrypted)"
    /// The default visible category.
    public static let defaultCategory = "SECRET"

    /// A placeholder; the defaults give `Secret Message!` / `(Encrypted)` / `SECRET`.
    public init(title: String? = Placeholder.defaultTitle, body: String = Placeholder.defaultBody,
                category: String? = Placeholder.defaultCategory) {
        self.title = title
        self.body = body
        self.category = category
    }

    /// The default placeholder.
    public static let standard = Placeholder()
}

/// The APNs payload of a sealed notification, in the APNSwift style (`Codable`, wire names as coding keys).
///
/// `Codable` is there for interoperability and tests; the sender writes the bytes with `write(into:)`,
/// which produces the same compact JSON without `JSONEncoder`.
///
/// **Send the payload bytes as they are** (`SealedNotification.payload`). If an APNs client insists on
/// encoding a model, encode this one with `APNsPayload.makeJSONEncoder()` (or `encodedJSON()`): a
/// default `JSONEncoder` writes every `/` of the base64 `ENCRYPTED_DATA` as `\/`, which can take a
/// payload sealed close to the limit (`--padding max`: 4094 bytes) past APNs's 4096.
public struct APNsPayload: Codable, Sendable, Equatable {
    /// The `aps` dictionary.
    public struct APS: Codable, Sendable, Equatable {
        /// The visible alert.
        public struct Alert: Codable, Sendable, Equatable {
            /// The visible title, if any.
            public var title: String?
            /// The visible body.
            public var body: String?

            /// An alert from its strings.
            public init(title: String?, body: String?) {
                self.title = title
                self.body = body
            }
        }

        /// The visible placeholder alert.
        public var alert: Alert
        /// Always `1`, so the notification service extension runs.
        public var mutableContent: Int
        /// The visible category, if any.
        public var category: String?

        enum CodingKeys: String, CodingKey {
            case alert
            case mutableContent = "mutable-content"
            case category
        }

        /// An `aps` dictionary from its members.
        public init(alert: Alert, mutableContent: Int = 1, category: String?) {
            self.alert = alert
            self.mutableContent = mutableContent
            self.category = category
        }
    }

    /// The `aps` dictionary.
    public var aps: APS
    /// The base64 envelope.
    public var encryptedData: String

    enum CodingKeys: String, CodingKey {
        case aps
        case encryptedData = "ENCRYPTED_DATA"
    }

    /// A payload from its parts.
    public init(aps: APS, encryptedData: String) {
        self.aps = aps
        self.encryptedData = encryptedData
    }

    /// The payload for `placeholder` carrying `encryptedData`.
    public init(placeholder: Placeholder, encryptedData: String) {
        self.init(aps: APS(alert: .init(title: placeholder.title, body: placeholder.body), category: placeholder.category),
                  encryptedData: encryptedData)
    }

    /// Appends everything before the `ENCRYPTED_DATA` value, up to and including its opening quote.
    public func writePrefix(into out: inout [UInt8]) {
        out.append(contentsOf: #"{"aps":{"alert":{"#.utf8)
        var first = true
        if let title = aps.alert.title {
            out.append(contentsOf: #""title":"#.utf8)
            JSON.writeString(title, into: &out)
            first = false
        }
        if let body = aps.alert.body {
            if !first { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #""body":"#.utf8)
            JSON.writeString(body, into: &out)
        }
        out.append(contentsOf: #"},"mutable-content":"#.utf8)
        out.append(contentsOf: String(aps.mutableContent).utf8)
        if let category = aps.category {
            out.append(contentsOf: #","category":"#.utf8)
            JSON.writeString(category, into: &out)
        }
        out.append(contentsOf: #"},"ENCRYPTED_DATA":""#.utf8)
    }

    /// The bytes after the `ENCRYPTED_DATA` value: its closing quote and the closing brace.
    public static let suffix: [UInt8] = Array(#""}"#.utf8)

    /// Appends the compact JSON of the payload to `out`.
    public func write(into out: inout [UInt8]) {
        writePrefix(into: &out)
        out.removeLast()  // the prefix's opening quote: writeString writes the value with its own quotes (and escapes)
        JSON.writeString(encryptedData, into: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// The compact JSON bytes of the payload.
    public var jsonBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256 + encryptedData.utf8.count)
        write(into: &out)
        return out
    }

    /// A `JSONEncoder` that encodes the payload model at its sealed size: slashes are not escaped
    /// (`.withoutEscapingSlashes`), so base64 keeps its length.
    public static func makeJSONEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }

    /// The payload encoded with `makeJSONEncoder()`: the same size as the bytes the sender wrote.
    public func encodedJSON() throws -> Data { try Self.makeJSONEncoder().encode(self) }
}

/// The HTTP/2 request headers APNs needs for a sealed notification.
public struct APNsHeaders: Sendable, Equatable {
    /// `apns-push-type`: always `alert` (the placeholder is an alert).
    public static let pushType = "alert"
    /// `apns-priority`: always `10` (deliver immediately; alerts need it).
    public static let priority = "10"

    /// `apns-expiration`: Unix seconds, `0` when the message has no expiry (APNs then tries once and does not store it).
    public var expiration: Int64
    /// `apns-collapse-id`, when given.
    public var collapseID: String?
    /// `apns-topic`, when given.
    public var topic: String?

    /// Headers from their values.
    /// Checks an `apns-collapse-id`: 1 to 64 bytes of text without control characters (APNs' rule).
    public static func validateCollapseID(_ collapseID: String) throws(SenderError) {
        if let problem = APNsHeaderRules.collapseIDProblem(collapseID) { throw .invalidCollapseID(problem.description) }
    }

    /// Checks an `apns-topic` (the app's bundle id) by `APNsHeaderRules`.
    public static func validateTopic(_ topic: String) throws(SenderError) {
        if let problem = APNsHeaderRules.topicProblem(topic) { throw .invalidTopic(problem.description) }
    }

    public init(expiration: Int64, collapseID: String? = nil, topic: String? = nil) {
        self.expiration = expiration
        self.collapseID = collapseID
        self.topic = topic
    }

    /// The headers in a fixed order: `apns-push-type`, `apns-priority`, `apns-expiration`, then
    /// `apns-collapse-id` and `apns-topic` when present.
    public var fields: [(name: String, value: String)] {
        var out: [(name: String, value: String)] = [
            ("apns-push-type", APNsHeaders.pushType), ("apns-priority", APNsHeaders.priority),
            ("apns-expiration", String(expiration)),
        ]
        if let collapseID { out.append(("apns-collapse-id", collapseID)) }
        if let topic { out.append(("apns-topic", topic)) }
        return out
    }

    /// The value of header `name` (lowercase), or `nil`.
    public subscript(name: String) -> String? {
        fields.first { $0.name == name }?.value
    }

    /// Appends the headers as one compact JSON object of strings, in the order of `fields`.
    public func writeJSON(into out: inout [UInt8]) {
        out.append(contentsOf: #"{"apns-push-type":"alert","apns-priority":"10","apns-expiration":""#.utf8)
        out.append(contentsOf: String(expiration).utf8)
        out.append(UInt8(ascii: "\""))
        if let collapseID {
            out.append(contentsOf: #","apns-collapse-id":"#.utf8)
            JSON.writeString(collapseID, into: &out)
        }
        if let topic {
            out.append(contentsOf: #","apns-topic":"#.utf8)
            JSON.writeString(topic, into: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// The headers as a JSON object of strings.
    public var jsonObject: JSONObject {
        JSONObject(fields.map { ($0.name, JSONValue.string($0.value)) })
    }
}
