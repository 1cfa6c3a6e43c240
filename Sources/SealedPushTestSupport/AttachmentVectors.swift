import Foundation
public import SealedPushCrypto
public import SealedPushWire

/// The independent implementation's attachment vectors (`shared/vectors/attachments-v1.json`), read at test time.
public struct AttachmentVectors: Sendable {
    /// One media object: its descriptor, the object's bytes, and the file's digest or the failure reason.
    public struct MediaObject: Sendable {
        /// The vector's name.
        public let name: String
        /// The descriptor as it appears in a body.
        public let descriptor: JSONObject
        /// The media object's bytes.
        public let object: [UInt8]
        /// The decrypted file's SHA-256 (lowercase hex), when it decrypts.
        public let fileSHA256: String?
        /// The decrypted file's length, when it decrypts.
        public let fileSize: Int?
        /// The object's length, when it decrypts.
        public let objectSize: Int?
        /// The expected reason code, when it fails.
        public let reason: String?

        /// The descriptor's media key.
        public var key: SecureBytes { get throws { SecureBytes(try Base64.decode(descriptor["key"]?.stringValue ?? "")) } }
        /// The descriptor's `type`.
        public var type: String { descriptor["type"]?.stringValue ?? "" }
        /// The descriptor's `size`.
        public var size: Int { Int(descriptor["size"]?.intValue ?? 0) }
    }

    /// One message: `ENCRYPTED_DATA` and the expected outcome.
    public struct Message: Sendable {
        /// The vector's name.
        public let name: String
        /// The `ENCRYPTED_DATA` value.
        public let encryptedData: String
        /// `decrypted` or `fallback`.
        public let outcome: String
        /// The expected reason of a fallback.
        public let reason: String?
        /// The expected body of a decrypted message.
        public let body: JSONObject?
        /// Whether the vector is about the `receipt` member (receipts-v1, not attachments).
        public var isReceiptVector: Bool { name.hasPrefix("receipt") }
    }

    /// The reference time (Unix seconds).
    public let now: Int64
    /// The clock skew the vectors assume.
    public let skewSeconds: Int64
    /// The device keys.
    public let deviceKeys: [BoxKeyPair]
    /// The media object vectors.
    public let mediaObjects: [MediaObject]
    /// The message vectors.
    public let messages: [Message]

    /// Loads `attachments-v1.json` from the shared directory.
    public static func load() throws -> AttachmentVectors {
        let url = ProjectPaths.shared.appendingPathComponent("vectors/attachments-v1.json")
        guard case let .object(root) = try JSON.parse([UInt8](try Data(contentsOf: url))) else { throw VectorFileError("root is not an object") }
        func objects(_ v: JSONValue?) throws -> [JSONObject] {
            guard case let .array(a)? = v else { throw VectorFileError("expected an array") }
            return try a.map { guard case let .object(o) = $0 else { throw VectorFileError("expected objects") }; return o }
        }
        func string(_ o: JSONObject, _ k: String) throws -> String {
            guard let s = o[k]?.stringValue else { throw VectorFileError("missing string \(k)") }
            return s
        }
        let keys = try objects(root["device_keys"]).map { try BoxKeyPair(secretKey: SecureBytes(try Base64.decode(try string($0, "secret_key")))) }
        let media = try objects(root["media_objects"]).map { o in
            guard let expect = o["expect"]?.objectValue, let descriptor = o["descriptor"]?.objectValue else { throw VectorFileError("missing expect") }
            return MediaObject(name: try string(o, "name"), descriptor: descriptor, object: try Base64.decode(try string(o, "object")),
                               fileSHA256: expect["file_sha256"]?.stringValue, fileSize: expect["file_size"]?.intValue.map { Int($0) },
                               objectSize: expect["object_size"]?.intValue.map { Int($0) }, reason: expect["reason"]?.stringValue)
        }
        let messages = try objects(root["messages"]).map { o in
            guard let expect = o["expect"]?.objectValue else { throw VectorFileError("missing expect") }
            return Message(name: try string(o, "name"), encryptedData: try string(o, "encrypted_data"), outcome: try string(expect, "outcome"),
                           reason: expect["reason"]?.stringValue, body: expect["body"]?.objectValue)
        }
        guard let now = root["now"]?.intValue, let skew = root["skew_seconds"]?.intValue else { throw VectorFileError("missing now") }
        return AttachmentVectors(now: now, skewSeconds: skew, deviceKeys: keys, mediaObjects: media, messages: messages)
    }
}
