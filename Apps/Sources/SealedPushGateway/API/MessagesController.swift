import Hummingbird
import SealedPushWire

/// The message routes (gateway v1 §5, §8's event listing): reading HTTP and answering JSON; sealing, queueing,
/// idempotency and cancelling live in the `Gateway` service.
struct MessagesController {
    let gateway: Gateway

    func addRoutes(to routes: inout RouteTable) {
        let api = AppAPI(gateway: gateway)
        let gateway = gateway
        routes.on("v1/apps/:app/messages", .post) { request, context in
            try await api.call(request, context, [.send]) { app in
                let key = request.headers[.idempotencyKey]
                if let key {
                    let keyBytes = Array(key.utf8)
                    guard (1...255).contains(keyBytes.count), keyBytes.allSatisfy({ (0x20...0x7e).contains($0) }) else {
                        throw GatewayError.invalidField("", "the Idempotency-Key header must be 1-255 printable ASCII characters")
                    }
                }
                let answer = try await gateway.postMessage(app: app, body: try await GatewayHTTP.body(request, limit: app.config.mailbox.enabled
                                                          ? Gateway.maxMessageRequestBytes : GatewayHTTP.maxBodyBytes),
                                                      idempotencyKey: key)
                var response = GatewayHTTP.json(bytes: answer.body, status: answer.status)
                if answer.replayed { response.headers[.idempotentReplayed] = "true" }
                return response
            }
        }
        routes.on("v1/apps/:app/messages/batch", .post) { request, context in
            try await api.call(request, context, [.send], perRequest: false) { app in
                guard request.headers[.idempotencyKey] == nil else {
                    throw GatewayError.invalidField("", "a batch takes no Idempotency-Key header: give each message its own idempotency_key member")
                }
                let body = try await gateway.postBatch(app: app, body: try await GatewayHTTP.body(request, limit: Gateway.maxBatchBytes),
                                                  requestID: context.requestID)
                return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
            }
        }
        routes.on("v1/apps/:app/messages/:message_id", .get) { request, context in
            try await api.call(request, context, [.send, .read]) { app in
                GatewayHTTP.json(.object(try await gateway.messageJSON(app: app, messageID: try GatewayHTTP.pathMessageID(context))))
            }
        }
        routes.on("v1/apps/:app/messages/:message_id", .delete) { request, context in
            try await api.call(request, context, [.send]) { app in
                let query = request.uri.queryParameters
                let retract = query.get("retract")
                guard retract == nil || retract == "shown" else {
                    throw GatewayError.invalidField("", "the query parameter retract takes only shown (mailbox v1 §6)")
                }
                let retracted = try await gateway.cancelMessage(app: app, messageID: try GatewayHTTP.pathMessageID(context), retractShown: retract != nil)
                // Mailbox v1 §6: with ?retract=shown the answer lists each retracted delivery; without, 204 as before.
                guard retract != nil else { return Response(status: .noContent) }
                return GatewayHTTP.json(.object(JSONObject([("deliveries", .array(retracted.map {
                    .object(JSONObject([("delivery_id", .string($0.deliveryID)), ("retraction", .string($0.retraction))]))
                }))])))
            }
        }
        routes.on("v1/apps/:app/events", .get) { request, context in
            try await api.call(request, context, [.read]) { app in
                let query = request.uri.queryParameters
                try GatewayHTTP.onlyParameters(query, ["after", "limit"])
                let limit = try GatewayHTTP.limit(query)
                let after = query.get("after")
                if let after, !GatewayIDs.isEventID(after) {
                    throw GatewayError.invalidField("", "the query parameter after must be an event id (evt_ and 32 hex digits) from an earlier listing or webhook")
                }
                let body = try await gateway.eventListing(app: app, after: after, limit: limit)
                return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
            }
        }
    }
}
