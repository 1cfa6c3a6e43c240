import SealedPushWire

/// A Matrix error answer (matrix v1 §2): `{"errcode", "error"}` with its status, not RFC 9457. `error` says what
/// happened and what to do; it never quotes a pushkey, a key or any value of the request.
struct MatrixError: Error, Sendable, Equatable {
    /// The HTTP status.
    let status: Int
    /// The Matrix error code (`M_BAD_JSON`, `M_NOT_JSON`, `M_FORBIDDEN`, `M_TOO_LARGE`, `M_UNRECOGNIZED`, `M_UNKNOWN`).
    let errcode: String
    /// What happened and what to do.
    let error: String
    /// Seconds a `503` asks the homeserver to wait.
    var retryAfter: Int? = nil

    static func badJSON(_ error: String) -> MatrixError { MatrixError(status: 400, errcode: "M_BAD_JSON", error: error) }
    static let notJSON = MatrixError(status: 400, errcode: "M_NOT_JSON", error: "the body is not JSON; send the notification as the Matrix Push Gateway API describes it")
    static let tooLarge = MatrixError(status: 413, errcode: "M_TOO_LARGE",
                                      error: "the body is over \(MatrixNotification.maxBodyBytes / 1024) KiB; a notification is at most 64 KiB with at most \(MatrixNotification.maxDevices) devices")
    static func forbidden(_ error: String) -> MatrixError { MatrixError(status: 403, errcode: "M_FORBIDDEN", error: error) }
    static let unrecognized = MatrixError(status: 404, errcode: "M_UNRECOGNIZED", error: "no such endpoint; this gateway serves POST /_matrix/push/v1/notify")
    static let methodNotAllowed = MatrixError(status: 405, errcode: "M_UNRECOGNIZED", error: "this endpoint takes POST only")
    static func unavailable(_ error: String, retryAfter: Int = 5) -> MatrixError {
        MatrixError(status: 503, errcode: "M_UNKNOWN", error: error, retryAfter: retryAfter)
    }
    static func `internal`(requestID: String) -> MatrixError {
        MatrixError(status: 500, errcode: "M_UNKNOWN", error: "the gateway failed to handle this notification (request \(requestID)); the homeserver retries it, and the gateway's log names the cause")
    }

    /// The body.
    var json: [UInt8] { JSON.serialize(.object(JSONObject([("errcode", .string(errcode)), ("error", .string(error))]))) }
}

/// A `POST /_matrix/push/v1/notify` body, checked (matrix v1 §2, the Matrix Push Gateway API): members this page
/// does not read are ignored, as the Matrix specification lets homeservers add members.
struct MatrixNotification: Sendable {
    /// The largest body.
    static let maxBodyBytes = 64 * 1024
    /// The most devices of one notification.
    static let maxDevices = 50

    /// One device (pusher) the notification goes to.
    struct Device: Sendable {
        /// The pusher's `app_id`.
        var appID: String
        /// The pusher's `pushkey`.
        var pushkey: String
        /// When the pushkey was last set (Unix seconds), if the homeserver says.
        var pushkeyTS: Int64?
        /// The pusher's `data` (without `url`, as homeservers send it).
        var data: JSONObject
    }

    var eventID: String?
    var roomID: String?
    var type: String?
    var sender: String?
    var senderDisplayName: String?
    var roomName: String?
    var roomAlias: String?
    /// `prio`: `"high"` (the default) or `"low"`.
    var lowPriority: Bool
    var content: JSONObject?
    /// `counts` as sent (`unread`, `missed_calls`), or nil.
    var counts: JSONObject?
    var unread: Int64?
    var devices: [Device]

    /// Reads a body; `M_NOT_JSON` when it is not JSON, `M_BAD_JSON` naming the member when it is not a notification.
    init(_ bytes: [UInt8]) throws(MatrixError) {
        guard let value = try? JSON.parse(bytes) else { throw .notJSON }
        guard case let .object(root) = value else { throw .badJSON("the body must be a JSON object {\"notification\": {…}}") }
        guard case let .object(n)? = root["notification"] else {
            throw .badJSON("notification is missing or not an object; send {\"notification\": {…, \"devices\": […]}}")
        }
        func string(_ name: String, max: Int = 4096) throws(MatrixError) -> String? {
            switch n[name] {
            case nil, .null?: return nil
            case let .string(s)?:
                guard s.utf8.count <= max else { throw .badJSON("notification.\(name) is longer than \(max) bytes") }
                return s
            default: throw .badJSON("notification.\(name) must be a string")
            }
        }
        eventID = try string("event_id", max: 255)
        roomID = try string("room_id", max: 255)
        type = try string("type", max: 255)
        sender = try string("sender", max: 255)
        senderDisplayName = try string("sender_display_name")
        roomName = try string("room_name")
        roomAlias = try string("room_alias", max: 255)
        switch try string("prio", max: 16) {
        case nil, "high"?: lowPriority = false
        case "low"?: lowPriority = true
        default: throw .badJSON("notification.prio must be \"high\" or \"low\"")
        }
        switch n["user_is_target"] {
        case nil, .null?, .bool?: break
        default: throw .badJSON("notification.user_is_target must be true or false")
        }
        switch n["content"] {
        case nil, .null?: content = nil
        case let .object(c)?: content = c
        default: throw .badJSON("notification.content must be an object")
        }
        switch n["counts"] {
        case nil, .null?: counts = nil
        case let .object(c)?:
            for name in ["unread", "missed_calls"] {
                switch c[name] {
                case nil, .null?: break
                case let .int(i)? where i >= 0 && i <= Int64(Int32.max): break
                default: throw .badJSON("notification.counts.\(name) must be a non-negative integer")
                }
            }
            counts = c
            unread = c["unread"]?.intValue
        default: throw .badJSON("notification.counts must be an object {\"unread\", \"missed_calls\"}")
        }
        guard case let .array(items)? = n["devices"] else {
            throw .badJSON("notification.devices is missing or not an array of devices {\"app_id\", \"pushkey\", …}")
        }
        guard (1...Self.maxDevices).contains(items.count) else {
            throw .badJSON("notification.devices must hold 1 to \(Self.maxDevices) devices; split a larger notification")
        }
        var devices: [Device] = []
        for (i, item) in items.enumerated() {
            guard case let .object(d) = item else { throw .badJSON("notification.devices[\(i)] must be an object") }
            guard let appID = d["app_id"]?.stringValue, (1...64).contains(appID.utf8.count) else {
                throw .badJSON("notification.devices[\(i)].app_id must be a string of 1 to 64 bytes")
            }
            guard let pushkey = d["pushkey"]?.stringValue, (1...4096).contains(pushkey.utf8.count) else {
                throw .badJSON("notification.devices[\(i)].pushkey must be a non-empty string")
            }
            var ts: Int64?
            switch d["pushkey_ts"] {
            case nil, .null?: ts = nil
            case let .int(t)? where t >= 0: ts = t
            default: throw .badJSON("notification.devices[\(i)].pushkey_ts must be a non-negative integer (Unix seconds)")
            }
            var data = JSONObject([])
            switch d["data"] {
            case nil, .null?: break
            case let .object(o)?: data = o
            default: throw .badJSON("notification.devices[\(i)].data must be an object")
            }
            switch d["tweaks"] {
            case nil, .null?, .object?: break
            default: throw .badJSON("notification.devices[\(i)].tweaks must be an object")
            }
            devices.append(Device(appID: appID, pushkey: pushkey, pushkeyTS: ts, data: data))
        }
        self.devices = devices
    }

    /// A counts-only notification (a badge update): counts and no `event_id` (matrix v1 §4).
    var isBadgeUpdate: Bool { eventID == nil }

    /// The sealed alert (matrix v1 §4): with `format: event_id_only` or without `content`, title `""` and body
    /// `"New message"` (`"Missed call"` for `m.call.invite`); with `content`, title = `room_name` or
    /// `sender_display_name` and body = `content.body` when it is a string.
    func alert(eventIDOnly: Bool) -> (title: String, body: String) {
        let placeholder = type == "m.call.invite" ? "Missed call" : "New message"
        guard !eventIDOnly, let content else { return ("", placeholder) }
        let title = roomName ?? senderDisplayName ?? ""
        guard let body = content["body"]?.stringValue, body.contains(where: { !$0.isWhitespace }) else { return (title, placeholder) }
        return (title, body)
    }

    /// `{"matrix": {"event_id", "room_id", "type", "sender", "prio", "counts"}}`, the sealed body's `data`.
    var sealedData: JSONObject {
        var m = JSONObject([])
        m["event_id"] = eventID.map { .string($0) } ?? .null
        m["room_id"] = roomID.map { .string($0) } ?? .null
        m["type"] = type.map { .string($0) } ?? .null
        m["sender"] = sender.map { .string($0) } ?? .null
        m["prio"] = .string(lowPriority ? "low" : "high")
        m["counts"] = counts.map { .object($0) } ?? .null
        return JSONObject([("matrix", .object(m))])
    }
}
