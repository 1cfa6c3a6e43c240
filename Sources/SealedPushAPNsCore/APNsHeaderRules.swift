/// The rules APNs applies to the request headers a provider chooses, in one place: the sender checks a
/// message's headers with them before sealing, `APNsPush.problem` before sending, and the local APNs
/// answers by them.
public enum APNsHeaderRules {
    /// The longest `apns-collapse-id` APNs takes, in bytes.
    public static let maximumCollapseIDBytes = 64

    /// Why APNs would refuse a header value.
    public enum Problem: Sendable, Equatable, CustomStringConvertible {
        /// The value is empty.
        case empty
        /// The value is longer than APNs allows (`bytes` against `limit`).
        case tooLong(bytes: Int, limit: Int)
        /// The value holds control characters (a CR or LF would split the HTTP/2 header).
        case controlCharacters
        /// A topic holds whitespace or characters outside printable ASCII (a bundle id never does).
        case notABundleID

        /// The problem as a phrase that follows the header's name ("the collapse id is empty").
        public var description: String {
            switch self {
            case .empty: "is empty"
            case let .tooLong(bytes, limit): "is \(bytes) bytes, over the APNs limit of \(limit)"
            case .controlCharacters: "holds control characters"
            case .notABundleID: "holds whitespace, control or non-ASCII characters"
            }
        }
    }

    /// Checks an `apns-collapse-id`: 1 to 64 bytes of text without control characters.
    public static func collapseIDProblem(_ collapseID: String) -> Problem? {
        if collapseID.isEmpty { return .empty }
        let bytes = collapseID.utf8.count
        if bytes > maximumCollapseIDBytes { return .tooLong(bytes: bytes, limit: maximumCollapseIDBytes) }
        // General category Cc is exactly U+0000–U+001F and U+007F–U+009F (checked against the Unicode
        // properties in HeaderRulesTests); comparing code points spares a property lookup per scalar per push.
        if collapseID.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) { return .controlCharacters }
        return nil
    }

    /// Checks an `apns-topic`: a bundle id (with `.voip`, `.complication`… suffixes), non-empty printable
    /// ASCII without spaces.
    public static func topicProblem(_ topic: String) -> Problem? {
        if topic.isEmpty { return .empty }
        if !topic.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7f }) { return .notABundleID }
        return nil
    }
}
