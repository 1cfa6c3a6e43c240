public import SealedPushWire
import SealedPushCrypto

/// What a fetch by handle came to (mailbox v1 §3, §5).
public enum MailboxFetchResult: Sendable, Equatable {
    /// `200`: the envelope's bytes (wire v1 §2), to open as a push-mode message, then check `dlv`.
    case envelope([UInt8], messageID: String)
    /// `410 collected`: handed out before and confirmed, or its grace ended (outcome `replayed`).
    case collected
    /// `410 retracted`: the sender retracted it (mailbox v1 §6).
    case retracted
    /// `410 expired`: it expired (outcome `expired`).
    case expired
    /// `404`, a refused or unreadable answer, a network failure or the deadline: outcome `fallback`, reason
    /// `fetchFailed`, the handle kept to be fetched later.
    case failed(String)
}

/// Fetches a sealed message from the gateway by its handle (`POST {mailbox_url}/v1/mailbox/fetch`).
///
/// Implementations hold no state about the handle, send only `{"handle": …}` and bound the whole exchange by
/// `deadlineSeconds`, which is never more than 10 s (mailbox v1 §5); the envelope is never written to disk.
public protocol MailboxFetcher: Sendable {
    /// Fetches `handle` within `deadlineSeconds`; answers `.failed` rather than throwing.
    func fetch(_ handle: MailboxHandle, deadlineSeconds: Double) async -> MailboxFetchResult
}

extension MailboxFetchResult {
    /// The result a fetch answer means: its status and body (JSON), as mailbox v1 §3 defines them.
    public static func from(status: Int, body: [UInt8]) -> MailboxFetchResult {
        guard case let .object(o)? = try? JSON.parse(body) else { return .failed("the gateway answered \(status) without a JSON body") }
        switch status {
        case 200:
            guard let text = o["envelope"]?.stringValue, let bytes = try? Base64.decode(text),
                  let messageID = o["message_id"]?.stringValue else {
                return .failed("the gateway's 200 answer holds no envelope and message_id")
            }
            return .envelope(bytes, messageID: messageID)
        case 410:
            switch o["reason"]?.stringValue {
            case "retracted": return .retracted
            case "expired": return .expired
            case "collected": return .collected
            default: return .failed("the gateway answered 410 without a known reason")
            }
        default:
            return .failed("the gateway answered \(status)")
        }
    }
}

/// The `dlv` rule of mailbox v1 §5: an envelope fetched by `handle` opened to `rawBody`; false means
/// `handleMismatch` (the envelope belongs to another delivery).
public func mailboxBodyMatches(_ rawBody: JSONObject, handle: MailboxHandle) -> Bool {
    rawBody[MailboxHandle.bodyMember]?.stringValue == handle.deliveryID
}

/// One waiting delivery the list of mailbox v1 §7 gave back, with its fresh handle.
public struct MailboxListedHandle: Sendable, Equatable {
    /// The fresh handle (the delivery's earlier token no longer works).
    public let handle: MailboxHandle
    /// The message id the gateway gave the message.
    public let messageID: String

    /// A listed delivery.
    public init(handle: MailboxHandle, messageID: String) {
        self.handle = handle
        self.messageID = messageID
    }
}

/// What asking for the list of mailbox v1 §7 came to.
public enum MailboxListResult: Sendable, Equatable {
    /// `200`: the device's waiting deliveries, oldest first (at most 100).
    case handles([MailboxListedHandle])
    /// The challenge did not open with any of the device's keys, or the gateway answered `403 wrong_answer`.
    case wrongAnswer
    /// A refused or unreadable answer, a network failure or the deadline.
    case failed(String)
}

/// Asks the gateway for the device's waiting mailbox deliveries (mailbox v1 §7): `POST /v1/mailbox/challenge`, the
/// challenge opened with the device key (`answer`), then `POST /v1/mailbox/list`, the whole exchange within
/// `deadlineSeconds` (at most 10 s). `answer` returns the base64url answer to a sealed challenge, `nil` when no key
/// of the device opens it (then nothing more is sent).
public protocol MailboxLister: Sendable {
    /// The list for the device `deviceID` of `app`; answers `.failed` rather than throwing.
    func list(app: String, deviceID: String, deadlineSeconds: Double,
              answer: @Sendable (String) -> String?) async -> MailboxListResult
}

extension MailboxListResult {
    /// The result a list answer means: its status and body (JSON), as mailbox v1 §7 defines them. A handle in the
    /// answer that does not parse is left out (never used partly).
    public static func from(status: Int, body: [UInt8]) -> MailboxListResult {
        if status == 403 { return .wrongAnswer }
        guard status == 200 else { return .failed("the gateway answered \(status) to the list") }
        guard case let .object(o)? = try? JSON.parse(body), case let .array(items)? = o["handles"] else {
            return .failed("the gateway's list answer holds no handles")
        }
        return .handles(items.compactMap { item in
            guard let entry = item.objectValue, let text = entry["handle"]?.stringValue, let handle = MailboxHandle(text),
                  let messageID = entry["message_id"]?.stringValue else { return nil }
            return MailboxListedHandle(handle: handle, messageID: messageID)
        })
    }
}
