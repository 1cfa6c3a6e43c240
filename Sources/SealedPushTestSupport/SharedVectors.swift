public import Foundation
public import SealedPushCrypto
public import SealedPushWire
import Synchronization

/// Locates the repository and the `../shared` directory beside it (the normative spec and vectors).
public enum ProjectPaths {
    /// The repository root (the directory holding Package.swift).
    public static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url
    }()

    /// `$SEALEDPUSH_SHARED`, else `../shared` beside the repository.
    public static var shared: URL {
        if let env = ProcessInfo.processInfo.environment["SEALEDPUSH_SHARED"], !env.isEmpty {
            return URL(fileURLWithPath: env)
        }
        return root.deletingLastPathComponent().appendingPathComponent("shared")
    }

    /// The Python the interoperability tests run their independent peers with: `$SEALEDPUSH_PYTHON`, else the venv
    /// `make pydeps` makes under `.build/pyenv` (PyNaCl, cryptography, http_ece, h2, schemathesis…).
    public static var python: URL {
        if let env = ProcessInfo.processInfo.environment["SEALEDPUSH_PYTHON"], !env.isEmpty { return URL(fileURLWithPath: env) }
        return root.appendingPathComponent(".build/pyenv/bin/python")
    }

    /// The built `sealedpush` binary (the light CLI) of the current build configuration: `$SEALEDPUSH_BIN`,
    /// else beside the test bundle, else in `Apps/.build`.
    public static var sealedpushBinary: URL { executable("sealedpush", environment: "SEALEDPUSH_BIN") }

    /// The built `sealedpush-server` binary: `$SEALEDPUSH_SERVER_BIN`, else beside the test bundle, else in `Apps/.build`.
    public static var sealedpushServerBinary: URL { executable("sealedpush-server", environment: "SEALEDPUSH_SERVER_BIN") }

    /// An executable of the `Apps` package named `name`.
    public static func executable(_ name: String, environment variable: String) -> URL {
        if let env = ProcessInfo.processInfo.environment[variable], !env.isEmpty { return URL(fileURLWithPath: env) }
        // Test bundles live in .build/<triple>/<config>/; the executables sit beside them.
        let candidate = Bundle.main.bundleURL.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        for config in ["debug", "release"] {
            let url = root.appendingPathComponent("Apps/.build/\(config)/\(name)")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return candidate
    }
}

/// The independent implementation's test vectors (`shared/vectors/wire-v1.json`), read at test time.
public struct SharedVectors: Sendable {
    /// One device key of the vector file.
    public struct DeviceKey: Sendable {
        /// `active` or `retired`.
        public let role: String
        /// The key pair.
        public let keyPair: BoxKeyPair
    }

    /// One vector.
    public struct Vector: Sendable {
        /// Its name.
        public let name: String
        /// The `ENCRYPTED_DATA` value.
        public let encryptedData: String
        /// `decrypted` or `fallback`.
        public let outcome: String
        /// The expected reason code for a fallback.
        public let reason: String?
        /// The expected body for a decrypted vector.
        public let body: JSONObject?
    }

    /// The reference time of the vectors (Unix seconds).
    public let now: Int64
    /// The clock skew the vectors assume.
    public let skewSeconds: Int64
    /// The device keys.
    public let deviceKeys: [DeviceKey]
    /// The trusted sender keys.
    public let trustedSenders: [SigningPublicKey]
    /// A sender key that is not trusted.
    public let untrustedSender: SigningPublicKey
    /// Every vector.
    public let vectors: [Vector]

    /// The shared vectors, for test arguments evaluated when tests are discovered: when they cannot
    /// be loaded the test process stops with one line naming `../shared` and `SEALEDPUSH_SHARED`,
    /// instead of a crash on `try!` (signal 4) or a suite of confusing failures.
    public static let required: SharedVectors = {
        do { return try load() } catch {
            let line = "error: the shared test vectors cannot be read (\(error)). The tests read them from "
                + "\(ProjectPaths.shared.path)/vectors/wire-v1.json: put the project's `shared` directory beside the "
                + "repository as ../shared, or set SEALEDPUSH_SHARED to its path.\n"
            FileHandle.standardError.write(Data(line.utf8))
            exit(1)
        }
    }()

    /// Loads `wire-v1.json` from the shared directory.
    public static func load() throws -> SharedVectors {
        let url = ProjectPaths.shared.appendingPathComponent("vectors/wire-v1.json")
        let bytes: [UInt8]
        do { bytes = [UInt8](try Data(contentsOf: url)) } catch { throw VectorFileError("\(url.path) does not exist or cannot be read") }
        guard case let .object(root) = try JSON.parse(bytes) else { throw VectorFileError("root is not an object") }
        func string(_ o: JSONObject, _ k: String) throws -> String {
            guard let s = o[k]?.stringValue else { throw VectorFileError("missing string \(k)") }
            return s
        }
        func objects(_ v: JSONValue?) throws -> [JSONObject] {
            guard case let .array(a)? = v else { throw VectorFileError("expected an array") }
            return try a.map { guard case let .object(o) = $0 else { throw VectorFileError("expected objects") }; return o }
        }
        let keys = try objects(root["device_keys"]).map { o in
            DeviceKey(role: try string(o, "role"),
                      keyPair: try BoxKeyPair(secretKey: SecureBytes(try Base64.decode(try string(o, "secret_key")))))
        }
        let trusted = try objects(root["trusted_senders"]).map { try SigningPublicKey(bytes: try Base64.decode(try string($0, "public_key"))) }
        guard let untrustedObject = root["untrusted_sender"]?.objectValue else { throw VectorFileError("missing untrusted_sender") }
        let untrusted = try SigningPublicKey(bytes: try Base64.decode(try string(untrustedObject, "public_key")))
        let vectors = try objects(root["vectors"]).map { o in
            guard let expect = o["expect"]?.objectValue else { throw VectorFileError("missing expect") }
            return Vector(name: try string(o, "name"), encryptedData: try string(o, "encrypted_data"),
                          outcome: try string(expect, "outcome"), reason: expect["reason"]?.stringValue,
                          body: expect["body"]?.objectValue)
        }
        guard let now = root["now"]?.intValue, let skew = root["skew_seconds"]?.intValue else { throw VectorFileError("missing now") }
        return SharedVectors(now: now, skewSeconds: skew, deviceKeys: keys, trustedSenders: trusted,
                             untrustedSender: untrusted, vectors: vectors)
    }
}

/// The vector file did not have the expected shape.
public struct VectorFileError: Error, CustomStringConvertible {
    /// What was wrong.
    public let description: String
    init(_ d: String) { description = d }
}

/// An in-memory key provider for tests.
public struct InMemoryKeys: DeviceKeyProvider {
    let keys: [KeyID: BoxKeyPair]
    let locked: Bool

    /// Keys found by id; all answer `.locked` when `locked`.
    public init(_ pairs: [BoxKeyPair], locked: Bool = false) {
        TestLogging.quiet()
        keys = Dictionary(pairs.map { ($0.keyID, $0) }, uniquingKeysWith: { a, _ in a })
        self.locked = locked
    }

    /// Looks the id up in memory.
    public func lookUpKey(id keyID: KeyID) -> KeyLookup {
        guard let pair = keys[keyID] else { return .unknown }
        return locked ? .locked : .found(pair)
    }
}

extension JSONValue {
    /// The value with every object's members sorted by key, for order-insensitive comparison.
    public var normalized: JSONValue {
        switch self {
        case let .object(o): return .object(JSONObject(o.members.sorted { $0.key < $1.key }.map { ($0.key, $0.value.normalized) }))
        case let .array(a): return .array(a.map(\.normalized))
        default: return self
        }
    }
}

/// An in-memory replay cache for tests.
public final class InMemoryReplayGuard: ReplayGuard {
    private let seen = Mutex<[String: (until: Int64, request: String?)]>([:])

    /// An empty cache.
    public init() { TestLogging.quiet() }

    /// Records `messageID` unless it is already present and unexpired; a present one is accepted
    /// again under the same (known) request identifier.
    public func recordIfNew(messageID: String, requestIdentifier: String?, keyID: KeyID, expiresAt: Int64, now: Int64) -> Bool {
        seen.withLock { seen in
            if let entry = seen[messageID], entry.until >= now {
                return requestIdentifier != nil && entry.request == requestIdentifier
            }
            seen[messageID] = (expiresAt, requestIdentifier)
            return true
        }
    }
}

/// Builds APNs payloads around wire-format envelopes for tests, without the sender module.
public enum TestPayloads {
    /// Seals `body` to `recipient` and wraps it in the default placeholder payload.
    public static func payload(body: MessageBody, to recipient: BoxPublicKey, signer: SigningKeyPair? = nil,
                               padding: PaddingPolicy = .bucket) throws -> [UInt8] {
        let skeleton = wrap(encryptedData: "")
        let envelope = try MessageSealer.seal(body: body, to: recipient, signer: signer, padding: padding,
                                              payloadOverhead: skeleton.count)
        return wrap(encryptedData: envelope.base64)
    }

    /// The default placeholder payload with `encryptedData` as `ENCRYPTED_DATA`.
    public static func wrap(encryptedData: String, title: String = "Secret Message!") -> [UInt8] {
        JSON.serialize(.object(JSONObject([
            ("aps", .object(JSONObject([
                ("alert", .object(JSONObject([("title", .string(title)), ("body", .string("(Encrypted)"))]))),
                ("mutable-content", .int(1)), ("category", .string("SECRET")),
            ]))),
            ("ENCRYPTED_DATA", .string(encryptedData)),
        ])))
    }

    /// A body addressed to `recipient`, issued at `now`.
    public static func body(to recipient: BoxPublicKey, title: String = "Agent K", text: String = "The eagle lands at noon.",
                            now: Int64, expiresAt: Int64? = nil, sender: KeyID? = nil, id: String = makeMessageID()) -> MessageBody {
        MessageBody(kid: recipient.keyID, id: id, issuedAt: now, expiresAt: expiresAt,
                    alert: .init(title: title, body: text), sender: sender)
    }
}
