public import SealedPushWire

/// The bulk path: one JSON request per line in, one JSON result per line out (JSON Lines).
///
/// Input line (members other than `to` are optional; at least one of title, subtitle, body must be non-empty).
/// Member names are snake_case throughout; the older `thread-id` and other spellings (`expires-in`,
/// `collapseId`, …) are refused with the name to use:
///
///     {"to": <device key record>, "title": "…", "subtitle": "…", "body": "…", "thread_id": "…",
///      "category": "…", "badge": 3, "sound": "…", "data": {…}, "expires_in": "2h" | 7200,
///      "collapse_id": "…", "topic": "…", "id": "…", "deliver_once": true (apns-expiration 0; default: 7 days),
///      "attachments": [{"file": "photo.jpg", "type": "image/jpeg", "name": "…"}, …],
///      "reveal": true (a reveal message, reveal v1 §2: the record needs a reveal key)}
///
/// `attachments` (up to 4; `type` and `name` optional) needs a `mediaStore`, where each file is encrypted, and
/// a `mediaSource`, the directory the files are read from: a line chooses both its recipient and its files, so
/// its `file` paths are relative to that directory and can never name a file outside it.
///
/// Output line: `{"payload":{…},"headers":{…}}` (plus `"signed_by":"<sender key id>"` when signed), or `{"line":N,"error":"…"}` when the line failed
/// (N counts every input line from 1, blank ones included). Unknown members are refused so typos surface.
public struct JSONLSealer: Sendable {
    /// What processing one input line did.
    public enum LineOutcome: Sendable, Equatable {
        /// The line was blank (only whitespace): nothing was written.
        case blank
        /// A payload line was written.
        case sealed
        /// An error line was written.
        case failed
    }

    /// The sender every line goes through.
    public let sender: NotificationSender
    /// Where lines with `attachments` put their encrypted media objects; `nil` refuses such lines.
    public let mediaStore: (any MediaObjectStore)?
    /// The directory lines' attachment files are read from (their paths relative to it); `nil` refuses such lines.
    public let mediaSource: MediaSource?

    /// The members an input line may have.
    public static let members: Set<String> = [
        "to", "title", "subtitle", "body", "thread_id", "category", "badge", "sound", "data", "expires_in",
        "collapse_id", "topic", "id", "attachments", "deliver_once", "reveal",
    ]

    /// Spellings of members in another style (kebab-case, camelCase), refused with the snake_case name to use.
    public static let renamedMembers: [String: String] = [
        "thread-id": "thread_id", "threadId": "thread_id", "threadID": "thread_id",
        "expires-in": "expires_in", "expiresIn": "expires_in",
        "collapse-id": "collapse_id", "collapseId": "collapse_id", "collapseID": "collapse_id",
    ]

    /// The members an entry of `attachments` may have.
    public static let attachmentMembers: Set<String> = ["file", "type", "name"]

    /// A JSONL sealer over `sender`; lines with attachments read their files inside `mediaSource` and
    /// encrypt them into `mediaStore` (both needed for such lines).
    public init(sender: NotificationSender, mediaStore: (any MediaObjectStore)? = nil, mediaSource: MediaSource? = nil) {
        self.sender = sender
        self.mediaStore = mediaStore
        self.mediaSource = mediaSource
    }

    /// Reads a line's `attachments` member: `[{"file": PATH, "type": MIME?, "name": NAME?}, …]` (empty if absent),
    /// each `file` confined to `source`; refused when it names files and `source` is `nil`.
    public static func attachments(from o: JSONObject, in source: MediaSource?) throws(SenderError) -> [MediaAttachment] {
        guard let value = o["attachments"] else { return [] }
        guard case let .array(items) = value else { throw .invalidRequest("member 'attachments' must be an array of {\"file\": …} objects") }
        guard items.count <= AttachmentDescriptor.maximumCount else {
            throw .invalidRequest("member 'attachments' holds \(items.count) entries; a message carries at most \(AttachmentDescriptor.maximumCount)")
        }
        var out: [MediaAttachment] = []
        for item in items {
            guard case let .object(entry) = item else { throw .invalidRequest("each entry of 'attachments' must be an object") }
            for (key, _) in entry where !attachmentMembers.contains(key) {
                throw .invalidRequest("unknown member '\(key)' in an attachment (allowed: file, name, type)")
            }
            guard case let .string(file)? = entry["file"], !file.isEmpty else {
                throw .invalidRequest("each attachment needs 'file', a non-empty path string")
            }
            guard let source else {
                throw .invalidRequest("member 'attachments' names files, and a batch reads files only inside a media source directory: pass the directory the attachment files are in, and give each 'file' relative to it")
            }
            var attachment = MediaAttachment(file: file, in: source)
            for key in ["type", "name"] {
                guard let v = entry[key] else { continue }
                guard case let .string(s) = v else { throw .invalidRequest("attachment member '\(key)' must be a string") }
                if key == "type" { attachment.type = s } else { attachment.name = s }
            }
            out.append(attachment)
        }
        return out
    }

    /// Reads one request object (the input line's shape).
    public static func request(from o: JSONObject) throws(SenderError) -> SealRequest {
        for (key, _) in o where !members.contains(key) {
            if let name = renamedMembers[key] {
                throw .invalidRequest("member '\(key)' is spelled '\(name)' (batch members are snake_case)")
            }
            throw .invalidRequest("unknown member '\(key)' (allowed: \(members.sorted().joined(separator: ", ")))")
        }
        guard let toValue = o["to"] else { throw .invalidRequest("member 'to' (the device key record object) is required") }
        guard case let .object(to) = toValue else { throw .invalidRequest("member 'to' must be a device key record object") }
        let device: DeviceKeyRecord
        do { device = try DeviceKeyRecord(json: to) } catch { throw .invalidDeviceRecord(error) }
        func string(_ key: String) throws(SenderError) -> String? {
            guard let v = o[key] else { return nil }
            guard case let .string(s) = v else { throw .invalidRequest("member '\(key)' must be a string") }
            return s
        }
        var message = SecretMessage(
            title: try string("title"), subtitle: try string("subtitle"), body: try string("body"),
            threadID: try string("thread_id"), category: try string("category"), sound: try string("sound"),
            messageID: try string("id"), collapseID: try string("collapse_id"), topic: try string("topic"))
        if let v = o["badge"] {
            guard case let .int(badge) = v else { throw .invalidRequest("member 'badge' must be an integer") }
            message.badge = badge
        }
        if let v = o["data"] {
            guard case let .object(data) = v else { throw .invalidRequest("member 'data' must be an object") }
            message.data = data
        }
        switch o["expires_in"] {
        case nil: break
        case let .int(seconds)?: message.expiry = .after(seconds: seconds)
        case let .string(text)?:
            guard let expiry = Expiry.duration(text) else {
                throw .invalidRequest("member 'expires_in' must be whole seconds or a duration like 500ms, 30s, 15m, 2h, 7d")
            }
            message.expiry = expiry
        default: throw .invalidRequest("member 'expires_in' must be an integer of seconds or a duration string")
        }
        switch o["deliver_once"] {
        case nil, .bool(false)?: break
        case .bool(true)?:
            guard o["expires_in"] == nil else {
                throw .invalidRequest("members 'deliver_once' and 'expires_in' contradict each other: deliver_once means no expiry")
            }
            message.expiry = .deliverOnce
        default: throw .invalidRequest("member 'deliver_once' must be true or false")
        }
        switch o["reveal"] {
        case nil, .bool(false)?: break
        case .bool(true)?: message.reveal = .standard
        default: throw .invalidRequest("member 'reveal' must be true or false")
        }
        return SealRequest(message: message, device: device)
    }

    /// Reads one request from the bytes of one line.
    public static func request(fromLine line: Span<UInt8>) throws(SenderError) -> SealRequest {
        let value: JSONValue
        do { value = try JSON.parse(line) } catch { throw .invalidRequest("the line is not valid JSON (\(error.description))") }
        guard case let .object(o) = value else { throw .invalidRequest("the line is not a JSON object") }
        return try request(from: o)
    }

    /// Whether `line` holds only JSON whitespace.
    public static func isBlank(_ line: Span<UInt8>) -> Bool {
        for i in line.indices {
            let c = line[i]
            guard c == 0x20 || c == 0x09 || c == 0x0d || c == 0x0a else { return false }
        }
        return true
    }

    /// Seals the request on input line `number` (its bytes without the newline) and appends one
    /// output line, newline included, to `out`.
    @discardableResult
    public func process(line: Span<UInt8>, number: Int, into out: inout [UInt8]) -> LineOutcome {
        if JSONLSealer.isBlank(line) { return .blank }
        do throws(SenderError) {
            let value: JSONValue
            do { value = try JSON.parse(line) } catch { throw .invalidRequest("the line is not valid JSON (\(error.description))") }
            guard case let .object(o) = value else { throw .invalidRequest("the line is not a JSON object") }
            let sealed = try seal(o)
            JSONLSealer.writeResult(sealed, into: &out)
            return .sealed
        } catch {
            JSONLSealer.writeError(error, line: number, into: &out)
            return .failed
        }
    }

    /// Appends `{"payload":…,"headers":…}` (with `"signed_by":KEY_ID` when the message was signed) and a newline.
    public static func writeResult(_ sealed: SealedNotification, into out: inout [UInt8]) {
        out.append(contentsOf: #"{"payload":"#.utf8)
        out.append(contentsOf: sealed.payload)
        out.append(contentsOf: #","headers":"#.utf8)
        sealed.headers.writeJSON(into: &out)
        writeSignedBy(sealed, into: &out)
        out.append(contentsOf: "}\n".utf8)
    }

    /// Appends `,"signed_by":"<sender key id>"` when `sealed` was signed (nothing when it was not):
    /// which key signed, beside the payload and headers (never inside `headers`, which go to APNs).
    public static func writeSignedBy(_ sealed: SealedNotification, into out: inout [UInt8]) {
        guard let signedBy = sealed.signedBy else { return }
        out.append(contentsOf: #","signed_by":""#.utf8)
        out.append(contentsOf: signedBy.hex.utf8)
        out.append(UInt8(ascii: "\""))
    }

    /// Appends `{"line":N,"error":"…"}` and a newline.
    public static func writeError(_ error: SenderError, line: Int, into out: inout [UInt8]) {
        out.append(contentsOf: #"{"line":"#.utf8)
        out.append(contentsOf: String(line).utf8)
        out.append(contentsOf: #","error":"#.utf8)
        JSON.writeString(error.description, into: &out)
        out.append(contentsOf: "}\n".utf8)
    }
}
