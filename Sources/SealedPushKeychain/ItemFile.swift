#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SealedPushCrypto
import SealedPushKeyring
import SealedPushWire

/// The identity of an item: what makes it unique and names its file.
struct ItemIdentity: Hashable, Sendable {
    var itemClass: KeychainItemClass
    var accessGroup: String
    var service: String
    var account: String

    /// The file name inside the access group's directory: `<class>@<service>@<account>.item`, with
    /// every byte outside `[A-Za-z0-9._-]` (and a leading `.`) written as `%XX`.
    var fileName: String {
        "\(itemClass.rawValue)@\(ItemIdentity.escape(service))@\(ItemIdentity.escape(account)).item"
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for (index, byte) in text.utf8.enumerated() {
            let c = Character(Unicode.Scalar(byte))
            let safe = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || (byte == UInt8(ascii: ".") && index > 0)
            if safe { out.append(c) } else { out += "%" + Hex.encode([byte]).uppercased() }
        }
        return out
    }

    /// Checks the parts are usable as a file name.
    func validate() throws(KeychainError) {
        guard !service.isEmpty else { throw .param("the service must not be empty; name the service the item belongs to") }
        guard !account.isEmpty else { throw .param("the account must not be empty; name the account of the item") }
        try ItemIdentity.validateGroup(accessGroup)
        guard fileName.utf8.count <= 240 else {
            throw .param("the service and account are too long to name a file (over 240 bytes escaped); shorten them")
        }
    }

    /// Access-group names become directory names: `[A-Za-z0-9._-]`, 1–100 bytes, not starting with `.`.
    static func validateGroup(_ group: String) throws(KeychainError) {
        let ok = !group.isEmpty && group.utf8.count <= 100 && !group.hasPrefix(".")
            && group.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a)
                || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") }
        guard ok else {
            throw .param("access group '\(group)' is not a valid name: use 1 to 100 of A-Z a-z 0-9 . _ - and do not start with '.'")
        }
    }
}

/// The public attributes written in clear as the first line of an item file.
struct ItemHeader: Sendable, Equatable {
    var itemClass: KeychainItemClass
    var accessGroup: String
    var service: String
    var account: String
    var label: String?
    var accessibility: Accessibility
    var applicationTag: [UInt8]?
    var created: Date
    var modified: Date

    var identity: ItemIdentity {
        ItemIdentity(itemClass: itemClass, accessGroup: accessGroup, service: service, account: account)
    }

    func item(data: SecureBytes?) -> KeychainItem {
        KeychainItem(itemClass: itemClass, accessGroup: accessGroup, service: service, account: account, label: label,
                     accessibility: accessibility, applicationTag: applicationTag, creationDate: created,
                     modificationDate: modified, data: data)
    }

    static let formatName = "sealedpush-keychain-item"

    var jsonBytes: [UInt8] {
        var o = JSONObject([("format", .string(Self.formatName)), ("version", .int(1)),
                            ("class", .string(itemClass.rawValue)), ("group", .string(accessGroup)),
                            ("service", .string(service)), ("account", .string(account))])
        if let label { o["label"] = .string(label) }
        o["accessible"] = .string(accessibility.rawValue)
        if let applicationTag { o["tag"] = .string(Base64.encode(applicationTag)) }
        o["created"] = .string(Timestamp.format(created))
        o["modified"] = .string(Timestamp.format(modified))
        return JSON.serialize(.object(o))
    }

    init(itemClass: KeychainItemClass, accessGroup: String, service: String, account: String, label: String?,
         accessibility: Accessibility, applicationTag: [UInt8]?, created: Date, modified: Date) {
        self.itemClass = itemClass
        self.accessGroup = accessGroup
        self.service = service
        self.account = account
        self.label = label
        self.accessibility = accessibility
        self.applicationTag = applicationTag
        self.created = ItemHeader.wholeSeconds(created)
        self.modified = ItemHeader.wholeSeconds(modified)
    }

    static func wholeSeconds(_ d: Date) -> Date { Date(timeIntervalSince1970: d.timeIntervalSince1970.rounded(.down)) }

    init(jsonBytes: [UInt8], path: String) throws(KeychainError) {
        let value: JSONValue
        do { value = try JSON.parse(jsonBytes) } catch { throw .decode(path: path, why: "the header is not JSON: \(error.reason)") }
        guard case let .object(o) = value else { throw .decode(path: path, why: "the header is not a JSON object") }
        guard o["format"]?.stringValue == Self.formatName, o["version"]?.intValue == 1 else {
            throw .decode(path: path, why: "the header does not name format \(Self.formatName) version 1")
        }
        func string(_ key: String) throws(KeychainError) -> String {
            guard let s = o[key]?.stringValue else { throw .decode(path: path, why: "the header lacks \"\(key)\"") }
            return s
        }
        guard let cls = KeychainItemClass(rawValue: try string("class")) else { throw .decode(path: path, why: "unknown class") }
        guard let acc = Accessibility(rawValue: try string("accessible")) else { throw .decode(path: path, why: "unknown accessibility") }
        guard let created = Timestamp.parse(try string("created")), let modified = Timestamp.parse(try string("modified")) else {
            throw .decode(path: path, why: "a date is not ISO 8601")
        }
        var tag: [UInt8]?
        if let t = o["tag"] {
            guard let s = t.stringValue, let bytes = try? Base64.decode(s) else { throw .decode(path: path, why: "the tag is not base64") }
            tag = bytes
        }
        var label: String?
        if let l = o["label"] {
            guard let s = l.stringValue else { throw .decode(path: path, why: "the label is not a string") }
            label = s
        }
        self.init(itemClass: cls, accessGroup: try string("group"), service: try string("service"), account: try string("account"),
                  label: label, accessibility: acc, applicationTag: tag, created: created, modified: modified)
    }
}

/// An item file: `header JSON \n base64(nonce || ciphertext || tag) \n`.
///
/// The secret is sealed with XChaCha20-Poly1305 under the store key; the associated data is a
/// domain string followed by the exact header bytes, so changing any attribute (identity included)
/// makes the file fail authentication.
struct ItemFile {
    static let domain: [UInt8] = Array("sealedpush-keychain-item-v1".utf8) + [0]

    let header: ItemHeader
    let headerBytes: [UInt8]
    let sealed: [UInt8]
    let path: String

    static func associatedData(_ headerBytes: [UInt8]) -> [UInt8] { domain + headerBytes }

    static func encode(header: ItemHeader, data: SecureBytes, storeKey: SecureBytes) throws(KeychainError) -> [UInt8] {
        let headerBytes = header.jsonBytes
        let sealed: [UInt8]
        do { sealed = try XChaCha20Poly1305.seal(data, key: storeKey, associatedData: associatedData(headerBytes)) } catch {
            throw .param("the store key is unusable (\(error.description)); the store.key file is damaged")
        }
        return headerBytes + [0x0a] + Array(Base64.encode(sealed).utf8) + [0x0a]
    }

    /// Splits and parses a file; checks its header names `expected` (a swapped file fails here).
    init(bytes: [UInt8], path: String, expected: ItemIdentity?) throws(KeychainError) {
        guard let firstNewline = bytes.firstIndex(of: 0x0a) else {
            throw .decode(path: path, why: "the file is cut short (no end of header line)")
        }
        guard bytes.last == 0x0a, bytes.count > firstNewline + 1 else {
            throw .decode(path: path, why: "the file is cut short (no sealed secret line)")
        }
        let headerBytes = Array(bytes[..<firstNewline])
        var sealedText = Array(bytes[(firstNewline + 1)..<(bytes.count - 1)])
        guard !sealedText.contains(0x0a) else { throw .decode(path: path, why: "the file has more than two lines") }
        let header = try ItemHeader(jsonBytes: headerBytes, path: path)
        let sealed: [UInt8]
        do { sealed = try Base64.decode(utf8Bytes: &sealedText) } catch {
            throw .decode(path: path, why: "the sealed secret is not base64")
        }
        if let expected, header.identity != expected {
            throw .authFailed(path: path, why: "the file holds the item for another identity (a swapped or renamed file)")
        }
        self.header = header
        self.headerBytes = headerBytes
        self.sealed = sealed
        self.path = path
    }

    /// Decrypts the secret, authenticating header and secret together.
    func open(storeKey: SecureBytes) throws(KeychainError) -> SecureBytes {
        do { return try XChaCha20Poly1305.open(sealed, key: storeKey, associatedData: ItemFile.associatedData(headerBytes)) } catch {
            throw .authFailed(path: path, why: "the sealed secret does not authenticate with its attributes under this store's key")
        }
    }
}
