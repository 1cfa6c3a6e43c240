import Foundation
import NIOConcurrencyHelpers
@testable import SealedPushGateway
import SealedPushTestSupport
import SealedPushWire
import Testing

/// Gateway v1 §5.1 with `max_queue`: each message of a batch takes its place in the app's queue as it is sealed, so
/// a batch never queues beyond the bound; large batches are written in chunks, each answered once durable.
extension GatewaySuites {
    @Suite("Batches and max_queue", .serialized, .timeLimit(.minutes(3)))
    struct GatewayBatchQueueTests {
        static func message(_ body: String) -> JSONValue {
            .object(JSONObject([("to", .object(JSONObject([("user_id", "u1")]))), ("body", .string(body))]))
        }

        @Test func aBatchNeverQueuesBeyondMaxQueue() async throws {
            var options = GatewayOptions()
            let commits = NIOLockedValueBox(0)
            options.afterBatchCommit = { commits.withLockedValue { $0 += 1 } }
            options.batchChunkDeliveries = 2
            try await InProcessGateway.with("batch-queue", options: options, extraApp: JSONObject([("max_queue", .int(5))])) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                try await g.register(phone, device: "d1", user: "u1")
                let batch = JSONValue.object(JSONObject([("messages", .array((1...20).map { Self.message("m\($0)") }))]))
                let answer = try await g.api.call(.POST, "/v1/apps/chat/messages/batch", json: batch)
                #expect(answer.status == 200, "\(answer.text)")
                let results = (answer.json["results"]?.arrayValue ?? []).compactMap { $0.objectValue }
                try #require(results.count == 20, "\(answer.text)")
                #expect(results.map { $0["status"]?.intValue ?? 0 } == Array(repeating: 202, count: 5) + Array(repeating: 503, count: 15), "\(answer.text)")
                let problem = try #require(results[5]["problem"]?.objectValue)
                #expect(problem["type"]?.stringValue == "urn:sealedpush:problem:unavailable" && problem["status"] == .int(503), "\(problem)")
                #expect(try await g.gateway.store.queueDepths()["chat"]?.queued == 5, "no more than max_queue deliveries queued")
                // Five deliveries in chunks of at most two: three transactions, each answered once committed.
                #expect(commits.withLockedValue { $0 } == 3)
                // Nothing stays reserved: the queue is full by its stored deliveries alone.
                #expect(g.gateway.apps["chat"]?.reservedQueue.withLockedValue { $0 } == 0)
                let alone = try await g.send(JSONObject([("user_id", "u1")]))
                #expect(alone.status == 503, "\(alone.text)")
            }
        }

        @Test func concurrentMessagesShareTheQueueBound() async throws {
            try await InProcessGateway.with("queue-concurrent", extraApp: JSONObject([("max_queue", .int(3))])) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                try await g.register(phone, device: "d1", user: "u1")
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for n in 0..<10 { group.addTask { try await g.send(JSONObject([("user_id", "u1")]), body: "m\(n)").status } }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(statuses.filter { $0 == 202 }.count == 3, "\(statuses)")
                #expect(statuses.filter { $0 == 503 }.count == 7, "\(statuses)")
                #expect(try await g.gateway.store.queueDepths()["chat"]?.queued == 3)
            }
        }
    }
}
