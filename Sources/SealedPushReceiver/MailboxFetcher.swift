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
