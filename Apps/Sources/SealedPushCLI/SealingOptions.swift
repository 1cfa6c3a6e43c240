import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SealedPushCrypto
import SealedPushKeychain
import SealedPushSender
import SealedPushWire

/// The message and sealing options `seal` and `send` share: the secret content, expiry, padding,
/// placeholder, attachments, signing and receipts.
struct SealingOptions: ParsableArguments {
    @Option(name: .long, parsing: .unconditional, help: "The secret title.")
    var title: String?

    @Option(name: .long, parsing: .unconditional, help: "The secret body text.")
    var body: String?

    @Option(name: .long, parsing: .unconditional, help: "The secret subtitle.")
    var subtitle: String?

    @Option(name: .customLong("thread-id"), help: ArgumentHelp("The notification thread id (sealed).", valueName: "ID"))
    var threadID: String?

    @Option(name: .long, help: "The notification category after decryption (sealed; the visible one stays the placeholder's).")
    var category: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The app badge number (sealed).", valueName: "N"))
    var badge: Int64?

    @Option(name: .long, help: "The sound name (sealed).")
    var sound: String?

    @Option(name: .customLong("expires-in"), parsing: .unconditional, help: ArgumentHelp(
        "Expire the message after this long (500ms, 30s, 15m, 2h, 7d); sets exp and apns-expiration (default: 7d).",
        valueName: "DURATION"))
    var expiresIn: DurationArgument?

    @Flag(name: .customLong("deliver-once"), help: "No expiry: apns-expiration 0, so APNs delivers at most once and never stores the push for an offline device (default: expire after 7d).")
    var deliverOnce = false

    @Option(name: .customLong("collapse-id"), help: ArgumentHelp("The apns-collapse-id header (visible to APNs; at most 64 bytes).", valueName: "ID"))
    var collapseID: String?

    @Option(name: .long, help: ArgumentHelp("How to pad: bucket (256/512/1024/2048), none, or max.", valueName: "POLICY"))
    var padding: PaddingPolicy = .bucket

    @Flag(name: .long, help: ArgumentHelp(
        "Seal a reveal message: iOS is shown only `Press and hold to read`; the text is sealed again to the device's reveal key and opens only when the user presses and holds on an unlocked phone (the record needs a `reveal` member)."))
    var reveal = false

    @Option(name: .customLong("placeholder-title"), help: ArgumentHelp("The visible placeholder title (not secret).", valueName: "TITLE"))
    var placeholderTitle: String = Placeholder.defaultTitle

    @Option(name: .long, parsing: .singleValue, help: ArgumentHelp(
        "Attach an encrypted media file (repeatable, at most 4); TYPE defaults to the one its extension names.",
        valueName: "FILE[:TYPE]"))
    var attach: [AttachmentArgument] = []

    @Option(name: .customLong("media-dir"), help: ArgumentHelp("Write encrypted media objects into this directory.", valueName: "DIR"))
    var mediaDir: String?

    @Option(name: .customLong("media-source"), help: ArgumentHelp(
        "The directory a --batch line's attachments[].file may be read from (relative to it; nothing outside it). Without it, batch lines with attachment files are refused.",
        valueName: "DIR"))
    var mediaSource: String?

    @Option(name: .customLong("media-url"), help: ArgumentHelp(
        "The URL --media-dir is served at (https, or http to a loopback address for development).", valueName: "BASE_URL"))
    var mediaURL: String?

    @Option(name: .customLong("sign-with"), help: ArgumentHelp(
        "Sign with the active sender key of this sender store (made by `sealedpush sender generate --keychain DIR`).",
        valueName: "DIR"))
    var signWith: String?

    @Option(name: .customLong("receipt-url"), help: ArgumentHelp(
        "Ask the device for a delivery receipt at this URL (https; http only to localhost/127.0.0.1); needs --receipts-db.",
        valueName: "URL"))
    var receiptURL: String?

    @Option(name: .customLong("receipts-db"), help: ArgumentHelp(
        "Record the expected receipt (SHA-256 of its token, message id, issued-at, device key id) in this SQLite database, the one `receipts serve --db` uses.",
        valueName: "FILE"))
    var receiptsDB: String?

    /// Whether any option that belongs to one message (not to a batch) was given, and which.
    var perMessageOption: String? {
        let given: [(String, Bool)] = [
            ("--title", title != nil), ("--body", body != nil), ("--subtitle", subtitle != nil),
            ("--thread-id", threadID != nil), ("--category", category != nil), ("--badge", badge != nil),
            ("--sound", sound != nil), ("--expires-in", expiresIn != nil), ("--deliver-once", deliverOnce),
            ("--collapse-id", collapseID != nil), ("--attach", !attach.isEmpty), ("--receipt-url", receiptURL != nil),
            ("--receipts-db", receiptsDB != nil), ("--reveal", reveal),
        ]
        return given.first { $0.1 }?.0
    }

    func validate() throws {
        if let badge, badge < 0 { throw ValidationError("--badge must be 0 or more (0 clears the badge); it was \(badge).") }
        if deliverOnce && expiresIn != nil {
            throw ValidationError("--deliver-once and --expires-in contradict each other: --deliver-once means no expiry (apns-expiration 0).")
        }
        if placeholderTitle.isEmpty { throw ValidationError("--placeholder-title must not be empty.") }
        if let collapseID {
            do { try APNsHeaders.validateCollapseID(collapseID) } catch { throw ValidationError("--collapse-id: \(error.description).") }
        }
        if let receiptURL {
            if let problem = ReceiptRequest.urlProblem(receiptURL) {
                throw ValidationError("--receipt-url \(problem); give an https URL (http only to localhost or 127.0.0.1).")
            }
            guard let receiptsDB, !receiptsDB.isEmpty else {
                throw ValidationError("--receipt-url needs --receipts-db FILE: the token must be recorded to check the receipt.")
            }
        } else if receiptsDB != nil {
            throw ValidationError("--receipts-db records the receipt --receipt-url asks for; give --receipt-url URL too.")
        }
        if (mediaDir == nil) != (mediaURL == nil) {
            throw ValidationError("--media-dir and --media-url go together: the directory the objects are written to and the URL it is served at.")
        }
        if !attach.isEmpty && mediaDir == nil {
            throw ValidationError("--attach needs --media-dir DIR and --media-url BASE_URL: where the encrypted objects go and where devices fetch them.")
        }
        if attach.count > AttachmentDescriptor.maximumCount {
            throw ValidationError("--attach was given \(attach.count) times; a message carries at most \(AttachmentDescriptor.maximumCount) attachments.")
        }
        if let signWith, signWith.isEmpty {
            throw ValidationError("--sign-with needs a sender store directory; it was given an empty path.")
        }
    }

    /// Refuses a single message without text.
    func validateText() throws {
        guard !(title ?? "").isEmpty || !(body ?? "").isEmpty || !(subtitle ?? "").isEmpty else {
            throw ValidationError("Give the message some text: a non-empty --title, --subtitle or --body.")
        }
    }

    /// The sender: placeholder, padding and the `--sign-with` key.
    func sender() throws -> NotificationSender {
        let signer = try signingKey()
        return try NotificationSender(placeholder: Placeholder(title: placeholderTitle), padding: padding, signer: signer)
    }

    /// The directory of `--media-source` batch attachment files are confined to, or `nil`.
    func mediaSourceDirectory() throws -> MediaSource? {
        guard let mediaSource else { return nil }
        return try MediaSource(directory: mediaSource)
    }

    /// The media store of `--media-dir`/`--media-url`, or `nil`.
    func mediaStore() throws -> DirectoryMediaStore? {
        guard let mediaDir, let mediaURL else { return nil }
        return try DirectoryMediaStore(directory: mediaDir, baseURL: mediaURL)
    }

    /// The single message the options describe, its attachments encrypted into `mediaStore`.
    func message(topic: String?, mediaStore: DirectoryMediaStore?) throws -> SecretMessage {
        var message = SecretMessage(
            title: title, subtitle: subtitle, body: body, threadID: threadID, category: category, badge: badge,
            sound: sound, expiry: deliverOnce ? .deliverOnce : expiresIn.map { .after(seconds: ($0.milliseconds + 999) / 1000) },
            collapseID: collapseID, topic: topic)
        if let mediaStore {
            for argument in attach {
                try message.attach(argument.attachment, to: mediaStore)
            }
        }
        message.receiptURL = receiptURL
        if reveal { message.reveal = .standard }
        return message
    }

    /// The active key of the `--sign-with` store, or `nil` when unsigned.
    func signingKey() throws -> SigningKeyPair? {
        guard let signWith else { return nil }
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: signWith, isDirectory: &isDirectory) else {
            throw CLIError("the sender store \(signWith) (--sign-with) does not exist; create it with `sealedpush sender generate --keychain \(signWith)`")
        }
        guard isDirectory else {
            throw CLIError("--sign-with \(signWith) is a file; pass the sender store directory made by `sealedpush sender generate --keychain DIR`")
        }
        let options = KeychainOptions(directory: signWith)
        let store = try openStore(options, create: false, role: .sender)
        return try keychain(options, role: .sender) { () throws(KeychainError) in try SenderKeyring(store: store).activeSigningKey() }
    }
}
