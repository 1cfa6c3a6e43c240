import Hummingbird
import SealedPushWire
import SealedPushCrypto

/// The device registry's routes (gateway v1 §4): reading HTTP (path, query, body) and answering JSON; the
/// registry's rules live in the `Gateway` service.
struct DevicesController {
    let gateway: Gateway

    func addRoutes(to routes: inout RouteTable) {
        let api = AppAPI(gateway: gateway)
        let gateway = gateway
        routes.on("v1/apps/:app/devices/:device_id", .put) { request, context in
            try await api.call(request, context, [.devices]) { app in
                let deviceID = try GatewayHTTP.pathID(context, "device_id")
                let (device, created) = try await gateway.registerDevice(app: app, deviceID: deviceID, body: try await GatewayHTTP.jsonBody(request))
                return GatewayHTTP.json(.object(device), status: created ? .created : .ok)
            }
        }
        routes.on("v1/apps/:app/devices/:device_id", .get) { request, context in
            try await api.call(request, context, [.devices, .read]) { app in
                GatewayHTTP.json(.object(try await gateway.device(app: app, deviceID: try GatewayHTTP.pathID(context, "device_id"))))
            }
        }
        routes.on("v1/apps/:app/devices/:device_id", .delete) { request, context in
            try await api.call(request, context, [.devices]) { app in
                try await gateway.deleteDevice(app: app, deviceID: try GatewayHTTP.pathID(context, "device_id"))
                return Response(status: .noContent)
            }
        }
        routes.on("v1/apps/:app/users/:user_id/devices", .get) { request, context in
            try await api.call(request, context, [.devices, .read]) { app in
                GatewayHTTP.json(.object(try await gateway.userDevices(app: app, userID: try GatewayHTTP.pathID(context, "user_id"))))
            }
        }
        routes.on("v1/apps/:app/users/:user_id/devices", .delete) { request, context in
            try await api.call(request, context, [.devices]) { app in
                try await gateway.deleteUserDevices(app: app, userID: try GatewayHTTP.pathID(context, "user_id"))
                return Response(status: .noContent)
            }
        }
        routes.on("v1/apps/:app/devices", .get) { request, context in
            try await api.call(request, context, [.devices, .read]) { app in
                GatewayHTTP.json(.object(try await gateway.listDevices(app: app, try Self.listQuery(request.uri.queryParameters))))
            }
        }
    }

    /// `?state=&since=&limit=&cursor=` of `GET …/devices`.
    static func listQuery(_ query: Parameters) throws(GatewayError) -> DeviceListQuery {
        try GatewayHTTP.onlyParameters(query, ["state", "since", "limit", "cursor"])
        var list = DeviceListQuery(limit: try GatewayHTTP.limit(query))
        if let s = query.get("state") {
            guard let parsed = DeviceState(rawValue: s) else {
                throw GatewayError.invalidField("", "the query parameter state must be active or unregistered")
            }
            list.state = parsed
        }
        if let s = query.get("since") {
            guard let t = GatewayTime.parse(s) else {
                throw GatewayError.invalidField("", "the query parameter since must be an RFC 3339 time such as 2026-11-23T20:57:27.123Z")
            }
            list.since = t
        }
        if let c = query.get("cursor") {
            guard let position = DeviceListQuery.Cursor.decode(c) else {
                throw GatewayError.invalidField("", "the query parameter cursor is not one this gateway gave; start again without it")
            }
            list.after = position
        }
        return list
    }
}

/// What `GET …/devices` asks for: a state, a time from which (inclusive), where the last page ended, how many.
struct DeviceListQuery: Sendable {
    var state: DeviceState?
    var since: Int64?
    var after: (Int64, String)?
    var limit: Int

    init(limit: Int) { self.limit = limit }

    /// The list cursor: `<updated_at ms>.<device_id>` (the position of the page's last device; the OpenAPI
    /// document gives its pattern, so any cursor of that form is a position to list after). Cursors of earlier
    /// versions, base64url of `<updated_at ms>:<device_id>`, are still read.
    enum Cursor {
        static func encode(_ updatedAt: Int64, _ deviceID: String) -> String {
            "\(updatedAt).\(deviceID)"
        }

        static func decode(_ text: String) -> (Int64, String)? {
            if let dot = text.firstIndex(of: "."), (1...16).contains(text.utf8.distance(from: text.startIndex, to: dot)),
               text[..<dot].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let t = Int64(text[..<dot]) {
                let id = String(text[text.index(after: dot)...])
                return IDSyntax.isValid(id) ? (t, id) : nil
            }
            guard let bytes = try? Base64.decodeURLSafeNoPadding(text), let s = String(validating: bytes, as: UTF8.self),
                  let colon = s.firstIndex(of: ":"), let t = Int64(s[..<colon]) else { return nil }
            let id = String(s[s.index(after: colon)...])
            return IDSyntax.isValid(id) ? (t, id) : nil
        }
    }
}
