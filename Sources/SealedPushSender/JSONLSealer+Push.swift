public import SealedPushAPNsCore
public import SealedPushWire

extension JSONLSealer {
    /// Seals one parsed request object, its `attachments` read inside `mediaSource` and encrypted into
    /// `mediaStore` (refused without both).
    public func seal(_ object: JSONObject) throws(SenderError) -> SealedNotification {
        var request = try JSONLSealer.request(from: object)
        let media = try JSONLSealer.attachments(from: object, in: mediaSource)
        if !media.isEmpty {
            guard let mediaStore else {
                throw .invalidRequest("member 'attachments' needs a media directory and URL (--media-dir DIR --media-url BASE_URL)")
            }
            for attachment in media { try request.message.attach(attachment, to: mediaStore) }
        }
        return try sender.seal(request.message, to: request.device)
    }

    /// One `send --batch` line: a `seal --batch` request plus `device_token` (64 hex digits), sealed into the
    /// push for that token; the topic is the line's `topic`, else `topic`.
    ///
    /// A line may name a topic of its own only when it is `topic` or one of `allowedTopics`: a provider token
    /// is good for every app of the team, so a line must not be able to push to another of them unasked.
    public func sealPush(line: Span<UInt8>, topic: String?, allowedTopics: Set<String> = []) throws(SenderError) -> APNsPush {
        let value: JSONValue
        do { value = try JSON.parse(line) } catch { throw .invalidRequest("the line is not valid JSON (\(error.description))") }
        guard case let .object(object) = value else { throw .invalidRequest("the line is not a JSON object") }
        guard case let .string(token)? = object["device_token"] else {
            throw .invalidRequest("the line has no \"device_token\" (the device's APNs token, 64 hex digits)")
        }
        guard APNsPush.isValidDeviceToken(token) else {
            throw .invalidRequest("\"device_token\" must be 64 hexadecimal digits; it has \(token.count) characters")
        }
        if case let .string(own)? = object["topic"], own != topic, !allowedTopics.contains(own) {
            let shown = APNsHeaderRules.topicProblem(own) == nil && own.utf8.count <= 255 ? "\"\(own)\" " : ""
            throw .invalidRequest("the line's \"topic\" \(shown)is not this run's topic nor one allowed besides it (send: --allow-topic TOPIC)")
        }
        let rest = JSONObject(object.members.filter { $0.key != "device_token" }.map { ($0.key, $0.value) })
        return APNsPush(try seal(rest), deviceToken: token, topic: topic)
    }
}

/// What `seal` writes around a payload (`--headers` output, a `--batch` output or error line), recognised
/// when one is handed where a bare APNs payload belongs (iOS would reject it as `invalidPayload`).
public enum SealOutputWrapper: Sendable, Equatable {
    /// `{"headers": …, "payload": …}`: `seal --headers` output.
    case headersOutput
    /// `{"payload": …, "headers": …}`: a `seal --batch` output line.
    case batchLine
    /// `{"line": N, "error": …}`: a `seal --batch` error line (nothing was sealed).
    case batchError

    /// The wrapper `bytes` are, or `nil` for anything else (an APNs payload starts with `aps`; only an
    /// object whose first member is a wrapper's is parsed at all).
    public static func detect(_ bytes: [UInt8]) -> SealOutputWrapper? {
        let start = bytes.drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0a || $0 == 0x0d }
        guard start.first == UInt8(ascii: "{") else { return nil }
        let member = start.dropFirst().drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0a || $0 == 0x0d }
        guard [#""headers""#, #""payload""#, #""line""#].contains(where: { member.starts(with: $0.utf8) }) else { return nil }
        guard case let .object(o)? = try? JSON.parse(bytes), o["aps"] == nil else { return nil }
        let keys = Set(o.members.map(\.key))
        if keys.contains("payload"), keys.contains("headers"), case .object? = o["payload"] {
            return o.members.first?.key == "headers" ? .headersOutput : .batchLine
        }
        if keys == ["line", "error"] { return .batchError }
        return nil
    }
}
