#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Custom data as plain Swift values: `SecretMessage(…, data: ["order": "42", "items": [1, 2], "paid": true])`.
// (No nil literal: `object[key] = nil` must keep meaning "remove the member"; write `.null` for null.)

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    /// A string.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// A number with a fraction.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// `true` or `false`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An array.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// An object, members in the literal's order (a later duplicate key replaces the earlier value).
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(JSONObject(elements)) }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    /// An object, members in the literal's order (a later duplicate key replaces the earlier value).
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self.init(elements) }
}

/// Why an `Encodable` value could not become a `JSONObject`.
public struct JSONEncodingError: Error, Sendable, CustomStringConvertible {
    /// What was wrong.
    public let description: String
}

extension JSONObject {
    /// The object a `Codable` value encodes to (with `JSONEncoder`), for custom data given as a Swift
    /// struct; throws when it does not encode to a JSON object.
    public init(encoding value: some Encodable) throws(JSONEncodingError) {
        let data: Data
        do { data = try JSONEncoder().encode(value) } catch { throw JSONEncodingError(description: "the value does not encode to JSON: \(error)") }
        guard case let .object(object)? = try? JSON.parse([UInt8](data)) else {
            throw JSONEncodingError(description: "the value encodes to JSON that is not an object; custom data is an object of members")
        }
        self = object
    }
}
