public import _CryptoExtras
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import SealedPushCrypto
import SealedPushWire

/// A Google service account's key, as the JSON key file from the Google Cloud console holds it: the RSA key
/// that signs the access-token assertions and the names that go with it.
///
/// Only `type` (`service_account`), `project_id`, `private_key_id`, `private_key` (RSA, PKCS#8 PEM),
/// `client_email` and `token_uri` are read; other members are ignored.
public struct FCMServiceAccount: Sendable {
    /// `project_id`: the Firebase project messages are sent for (unless the configuration names another).
    public let projectID: String
    /// `private_key_id`: the `kid` of every assertion.
    public let privateKeyID: String
    /// `client_email`: the `iss` of every assertion.
    public let clientEmail: String
    /// `token_uri`: where assertions are exchanged for access tokens (the `aud` of every assertion).
    public let tokenURI: String
    /// The RSA private key (held by swift-crypto, which clears it when released).
    public let privateKey: _RSA.Signing.PrivateKey

    /// The public half of the key (what a local FCM verifies assertions with).
    public var publicKey: _RSA.Signing.PublicKey { privateKey.publicKey }

    /// The largest key file read (Google's are about 2.4 KB).
    public static let maximumFileSize = 64 * 1024

    /// The smallest RSA key accepted, in bits.
    public static let minimumKeyBits = 2048

    /// A service account from its parts (tests and the local FCM).
    public init(projectID: String, privateKeyID: String, clientEmail: String, tokenURI: String,
                privateKey: _RSA.Signing.PrivateKey) {
        self.projectID = projectID
        self.privateKeyID = privateKeyID
        self.clientEmail = clientEmail
        self.tokenURI = tokenURI
        self.privateKey = privateKey
    }

    /// Loads a service-account JSON key file.
    ///
    /// The file is read as every key file SealedPush reads (`PrivateFile.read`): opened once without following a
    /// symbolic link, and checked on that descriptor — a regular file owned by this user with no group or other
    /// access (`chmod 600`), at most `maximumFileSize` bytes. Its bytes and the key's DER stay in wiped storage;
    /// the key must be RSA of at least 2048 bits, and is tried once by signing and verifying.
    public init(file path: String) throws(FCMServiceAccountError) {
        let text: SecureBytes
        do { text = try PrivateFile.read(path, limit: FCMServiceAccount.maximumFileSize) } catch {
            switch error {
            case .unreadable, .readFailed: throw .unreadable(path: path)
            case .symbolicLink: throw .symbolicLink(path: path)
            case let .notRegularFile(isDirectory): throw isDirectory ? .directory(path: path) : .notRegularFile(path: path)
            case .notOwner: throw .notOwner(path: path)
            case let .accessibleByOthers(mode): throw .readableByOthers(path: path, mode: Int(mode))
            case let .tooLarge(limit): throw .tooLarge(path: path, limit: limit)
            }
        }
        try self.init(json: text, source: path)
    }

    /// A service account from the bytes of its JSON key file, held in wiped storage (`source` names it in errors).
    public init(json: SecureBytes, source: String = "the FCM service account") throws(FCMServiceAccountError) {
        let members: FlatJSONObject
        do { members = try FlatJSONObject(json, secretMember: "private_key") } catch {
            switch error {
            case let .malformed(detail): throw .notJSON(source: source, detail: detail)
            case let .duplicate(member):
                throw .invalidMember(source: source, member: member, expected: "given once (the file names it twice)")
            }
        }
        func string(_ name: String, _ expected: String, _ valid: (String) -> Bool) throws(FCMServiceAccountError) -> String {
            guard members.names.contains(name) else { throw .missingMember(source: source, member: name) }
            guard let value = members.strings[name], valid(value) else {
                throw .invalidMember(source: source, member: name, expected: expected)
            }
            return value
        }
        _ = try string("type", #"the string "service_account" (this file is another kind of Google credential)"#) { $0 == "service_account" }
        let projectID = try string("project_id", FCMServiceAccount.projectIDRule, FCMServiceAccount.isValidProjectID)
        let keyID = try string("private_key_id", "a key id: 1–128 printable ASCII characters", FCMServiceAccount.isPrintableASCII)
        let email = try string("client_email", "the service account's e-mail address", FCMServiceAccount.isPlausibleEmail)
        let tokenURI = try string("token_uri", "an https URL (Google's is https://oauth2.googleapis.com/token)", FCMServiceAccount.isHTTPSURL)
        guard members.names.contains("private_key") else { throw .missingMember(source: source, member: "private_key") }
        guard let pem = members.secret else {
            throw .invalidMember(source: source, member: "private_key", expected: "a string holding a PKCS#8 PEM private key")
        }
        self.init(projectID: projectID, privateKeyID: keyID, clientEmail: email, tokenURI: tokenURI,
                  privateKey: try FCMServiceAccount.rsaKey(pem: pem, source: source))
    }

    /// The RSA key of a PKCS#8 PEM, at least 2048 bits, tried once.
    static func rsaKey(pem: SecureBytes, source: String) throws(FCMServiceAccountError) -> _RSA.Signing.PrivateKey {
        let der: SecureBytes
        do { der = try PEM.decode(pem, label: "PRIVATE KEY") } catch {
            switch error {
            case .noBlock: throw .notPEM(source: source)
            case .invalidBase64: throw .invalidBase64(source: source)
            }
        }
        // The `unsafe` initializer reads keys from 1024 bits, so a short key is named as such; 2048 is enforced below.
        let key: _RSA.Signing.PrivateKey
        do { key = try der.withUnsafeBytes { bytes in try _RSA.Signing.PrivateKey(unsafeDERRepresentation: bytes) } } catch {
            throw .notRSA(source: source)
        }
        guard key.keySizeInBits >= minimumKeyBits else { throw .keyTooSmall(source: source, bits: key.keySizeInBits) }
        let probe = Array("sealedpush service-account check".utf8)
        guard let signature = try? key.signature(for: probe, padding: .insecurePKCS1v1_5),
              key.publicKey.isValidSignature(signature, for: probe, padding: .insecurePKCS1v1_5)
        else { throw .signingFailed(source: source) }
        return key
    }

    /// Google's token endpoints: where a service account's assertion may go unless the configuration names another
    /// (`fcm.token_url`) explicitly. The first is what the console writes today; the others are older key files'.
    public static let googleTokenURIs: Set<String> = [
        "https://oauth2.googleapis.com/token", "https://www.googleapis.com/oauth2/v4/token", "https://accounts.google.com/o/oauth2/token",
    ]

    /// What a project id is, in words (errors).
    public static let projectIDRule = "a Google Cloud project id: 6–30 lowercase letters, digits or '-', starting with a letter and not ending with '-'"

    /// Project ids as Google makes them: `[a-z][a-z0-9-]{4,28}[a-z0-9]`.
    public static func isValidProjectID(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard (6...30).contains(b.count), let first = b.first, let last = b.last else { return false }
        let lower = { (c: UInt8) in c >= 0x61 && c <= 0x7A }
        let digit = { (c: UInt8) in c >= 0x30 && c <= 0x39 }
        return lower(first) && (lower(last) || digit(last)) && b.allSatisfy { lower($0) || digit($0) || $0 == 0x2D }
    }

    static func isPrintableASCII(_ s: String) -> Bool {
        (1...128).contains(s.utf8.count) && s.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    static func isPlausibleEmail(_ s: String) -> Bool {
        guard isPrintableASCII(s), let at = s.firstIndex(of: "@") else { return false }
        return at != s.startIndex && s.index(after: at) != s.endIndex
    }

    static func isHTTPSURL(_ s: String) -> Bool {
        guard s.utf8.count <= 2048, s.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), let url = URL(string: s) else { return false }
        return url.scheme?.lowercased() == "https" && !(url.host ?? "").isEmpty
    }
}

extension FCMServiceAccount {
    /// A new test service account for a local FCM (`sealedpush-server fcm generate-service-account`): an RSA 2048
    /// key in PKCS#8 PEM, `client_email` `sealedpush-dev@<project>.iam.gserviceaccount.com`, and its JSON key file's
    /// bytes (write them with mode 0600). Real service accounts come from the Google Cloud console.
    public static func generate(project: String, tokenURI: String) throws(FCMServiceAccountError) -> (account: FCMServiceAccount, json: SecureBytes) {
        guard isValidProjectID(project) else {
            throw .generationFailed(detail: "the project id must be \(projectIDRule)")
        }
        guard isHTTPSURL(tokenURI) else { throw .generationFailed(detail: "the token URI must be an https URL") }
        let key: _RSA.Signing.PrivateKey
        do { key = try _RSA.Signing.PrivateKey(keySize: .bits2048) } catch {
            throw .generationFailed(detail: "RSA key generation failed")
        }
        let keyID = SecureBytes.random(count: 20).unsafeCopyToArray().map { byte in
            let digits = Array("0123456789abcdef")
            return String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 0xF)])
        }.joined()
        let email = "sealedpush-dev@\(project).iam.gserviceaccount.com"
        // The PEM is a String because swift-crypto returns one; the file's bytes are moved into wiped storage.
        let object = JSONObject([
            ("type", .string("service_account")),
            ("project_id", .string(project)),
            ("private_key_id", .string(keyID)),
            ("private_key", .string(key.pkcs8PEMRepresentation + "\n")),
            ("client_email", .string(email)),
            ("token_uri", .string(tokenURI)),
        ])
        var bytes = JSON.serialize(.object(object))
        bytes.append(0x0A)
        let json = SecureBytes(bytes)
        bytes.withUnsafeMutableBytes { clearMemory($0) }
        return (FCMServiceAccount(projectID: project, privateKeyID: keyID, clientEmail: email, tokenURI: tokenURI, privateKey: key), json)
    }
}

/// The members of a flat JSON object: strings decoded, one secret member's string decoded straight into wiped
/// storage, and every other value checked for syntax and skipped. Strict: no duplicate names, no trailing bytes,
/// valid UTF-8 and escapes, no control characters in strings, nesting at most 32 deep.
struct FlatJSONObject {
    enum Problem: Error { case malformed(String), duplicate(String) }

    /// Every member name, in any order.
    var names: Set<String> = []
    /// The string members other than the secret one.
    var strings: [String: String] = [:]
    /// The secret member's string, when it is a string.
    var secret: SecureBytes?

    init(_ text: SecureBytes, secretMember: String) throws(Problem) {
        var result = FlatJSONObject(empty: ())
        try text.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(Problem) in
            var scanner = Scanner(bytes: bytes)
            try scanner.skipWhitespace()
            try scanner.expect(0x7B, "an object")
            try scanner.skipWhitespace()
            if try scanner.peek() == 0x7D {
                scanner.index += 1
            } else {
                while true {
                    try scanner.skipWhitespace()
                    guard try scanner.peek() == 0x22 else { throw .malformed("a member name was expected at byte \(scanner.index)") }
                    let name = try scanner.string()
                    guard !result.names.contains(name) else { throw .duplicate(name) }
                    result.names.insert(name)
                    try scanner.skipWhitespace()
                    try scanner.expect(0x3A, "':'")
                    try scanner.skipWhitespace()
                    if try scanner.peek() == 0x22 {
                        if name == secretMember {
                            result.secret = try scanner.secretString()
                        } else {
                            result.strings[name] = try scanner.string()
                        }
                    } else {
                        try scanner.skipValue(depth: 0)
                    }
                    try scanner.skipWhitespace()
                    let next = try scanner.next()
                    if next == 0x7D { break }
                    guard next == 0x2C else { throw .malformed("',' or '}' was expected at byte \(scanner.index - 1)") }
                }
            }
            try scanner.skipWhitespace(allowEnd: true)
            guard scanner.index == bytes.count else { throw .malformed("bytes follow the object at byte \(scanner.index)") }
        }
        self = result
    }

    private init(empty: ()) {}

    /// A cursor over the bytes (never copied except into decoded strings).
    struct Scanner {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        func peek() throws(Problem) -> UInt8 {
            guard index < bytes.count else { throw .malformed("the text ends early") }
            return bytes[index]
        }

        mutating func next() throws(Problem) -> UInt8 {
            let c = try peek()
            index += 1
            return c
        }

        mutating func expect(_ c: UInt8, _ what: String) throws(Problem) {
            guard try next() == c else { throw .malformed("\(what) was expected at byte \(index - 1)") }
        }

        mutating func skipWhitespace(allowEnd: Bool = false) throws(Problem) {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
            if !allowEnd, index >= bytes.count { throw .malformed("the text ends early") }
        }

        /// Decodes the string at the cursor into `out` (at most as long as its raw form); returns the length.
        mutating func decodeString(into out: UnsafeMutableRawBufferPointer) throws(Problem) -> Int {
            try expect(0x22, "a string")
            var count = 0
            func put(_ b: UInt8) { out[count] = b; count += 1 }
            func putScalar(_ v: UInt32) {
                if v < 0x80 { put(UInt8(v)) } else if v < 0x800 {
                    put(UInt8(0xC0 | (v >> 6))); put(UInt8(0x80 | (v & 0x3F)))
                } else if v < 0x10000 {
                    put(UInt8(0xE0 | (v >> 12))); put(UInt8(0x80 | ((v >> 6) & 0x3F))); put(UInt8(0x80 | (v & 0x3F)))
                } else {
                    put(UInt8(0xF0 | (v >> 18))); put(UInt8(0x80 | ((v >> 12) & 0x3F)))
                    put(UInt8(0x80 | ((v >> 6) & 0x3F))); put(UInt8(0x80 | (v & 0x3F)))
                }
            }
            while true {
                let c = try next()
                switch c {
                case 0x22: return count
                case 0x5C:
                    let e = try next()
                    switch e {
                    case 0x22, 0x5C, 0x2F: put(e)
                    case UInt8(ascii: "b"): put(0x08)
                    case UInt8(ascii: "f"): put(0x0C)
                    case UInt8(ascii: "n"): put(0x0A)
                    case UInt8(ascii: "r"): put(0x0D)
                    case UInt8(ascii: "t"): put(0x09)
                    case UInt8(ascii: "u"):
                        let high = try hex4()
                        if (0xD800..<0xDC00).contains(high) {
                            guard try next() == 0x5C, try next() == UInt8(ascii: "u") else { throw .malformed("a lone surrogate at byte \(index)") }
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw .malformed("a lone surrogate at byte \(index)") }
                            putScalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
                        } else {
                            guard !(0xDC00..<0xE000).contains(high) else { throw .malformed("a lone surrogate at byte \(index)") }
                            putScalar(high)
                        }
                    default: throw .malformed("an invalid escape at byte \(index - 1)")
                    }
                default:
                    guard c >= 0x20 else { throw .malformed("a control character in a string at byte \(index - 1)") }
                    put(c)
                }
            }
        }

        mutating func hex4() throws(Problem) -> UInt32 {
            var v: UInt32 = 0
            for _ in 0..<4 {
                let c = try next()
                let d: UInt32
                switch c {
                case 0x30...0x39: d = UInt32(c - 0x30)
                case 0x41...0x46: d = UInt32(c - 0x41 + 10)
                case 0x61...0x66: d = UInt32(c - 0x61 + 10)
                default: throw .malformed("an invalid \\u escape at byte \(index - 1)")
                }
                v = v << 4 | d
            }
            return v
        }

        /// The length of the raw string at the cursor, quotes excluded (an upper bound on its decoded length).
        func rawLength() throws(Problem) -> Int {
            var i = index + 1
            while i < bytes.count {
                if bytes[i] == 0x22 { return i - index - 1 }
                i += bytes[i] == 0x5C ? 2 : 1
            }
            throw .malformed("a string does not end")
        }

        mutating func string() throws(Problem) -> String {
            let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: max(try rawLength(), 1), alignment: 1)
            defer { scratch.deallocate() }
            let n = try decodeString(into: scratch)
            guard let s = String(validating: UnsafeRawBufferPointer(rebasing: scratch[0..<n]), as: UTF8.self) else {
                throw .malformed("invalid UTF-8 in a string before byte \(index)")
            }
            return s
        }

        /// The string at the cursor, decoded into wiped storage. It is decoded into a scratch buffer first (JSON
        /// escapes make it shorter than its raw form), which is cleared with `explicit_bzero` before it is freed.
        mutating func secretString() throws(Problem) -> SecureBytes {
            let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: max(try rawLength(), 1), alignment: 1)
            defer {
                clearMemory(scratch)
                scratch.deallocate()
            }
            let n = try decodeString(into: scratch)
            return SecureBytes(UnsafeRawBufferPointer(rebasing: scratch[0..<n]))
        }

        mutating func skipValue(depth: Int) throws(Problem) {
            guard depth < 32 else { throw .malformed("nesting deeper than 32 at byte \(index)") }
            let c = try peek()
            switch c {
            case 0x22:
                _ = try string()
            case 0x7B, 0x5B:
                index += 1
                let close: UInt8 = c == 0x7B ? 0x7D : 0x5D
                try skipWhitespace()
                if try peek() == close { index += 1; return }
                while true {
                    try skipWhitespace()
                    if c == 0x7B {
                        guard try peek() == 0x22 else { throw .malformed("a member name was expected at byte \(index)") }
                        _ = try string()
                        try skipWhitespace()
                        try expect(0x3A, "':'")
                        try skipWhitespace()
                    }
                    try skipValue(depth: depth + 1)
                    try skipWhitespace()
                    let next = try next()
                    if next == close { return }
                    guard next == 0x2C else { throw .malformed("',' was expected at byte \(index - 1)") }
                }
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            case UInt8(ascii: "-"), 0x30...0x39:
                let start = index
                while index < bytes.count, "+-.eE0123456789".utf8.contains(bytes[index]) { index += 1 }
                guard Double(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)) != nil else {
                    throw .malformed("an invalid number at byte \(start)")
                }
            default: throw .malformed("a value was expected at byte \(index)")
            }
        }

        mutating func literal(_ word: String) throws(Problem) {
            for b in word.utf8 { guard try next() == b else { throw .malformed("an invalid literal at byte \(index - 1)") } }
        }
    }
}

/// Overwrites `buffer` with zeros in a way the optimizer may not drop (the memory is freed right after).
func clearMemory(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return }
    #if canImport(Glibc)
    explicit_bzero(base, buffer.count)
    #else
    _ = memset_s(base, buffer.count, 0, buffer.count)
    #endif
}
