import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushAPNsServer
import SealedPushWire
import Testing

/// Every reason the local APNs can give, produced by a raw HTTP/2 request over loopback and read back
/// through the provider's response mapping.
@Suite("Local APNs: each check answers APNs's status and reason", .serialized, .timeLimit(.minutes(10)))
struct ReasonCatalogTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let reason: APNsReason
        var method: HTTPMethod = .POST
        var path: String? = nil
        var headers: [(String, String)] = []
        var drop: Set<String> = []
        var body: [UInt8]? = nil
        var keyID = "KEY0000001"
        var teamID = "TEAM000001"
        var issuedAgo: Int64 = 0
        var testDescription: String { name }
    }

    static let known = token(1), other = token(2), gone = token(3)

    static let cases: [Case] = [
        Case(name: "GET", reason: .methodNotAllowed, method: .GET),
        Case(name: "wrong path", reason: .badPath, path: "/3/devices/" + known),
        Case(name: "no token in the path", reason: .missingDeviceToken, path: "/3/device/"),
        Case(name: "short token", reason: .badDeviceToken, path: "/3/device/abcd"),
        Case(name: "apns-topic twice", reason: .duplicateHeaders, headers: [("apns-topic", LocalAPNs.topic)]),
        Case(name: "apns-id not a UUID", reason: .badMessageID, headers: [("apns-id", "not-a-uuid")], drop: ["apns-id"]),
        Case(name: "no authorization", reason: .missingProviderToken, drop: ["authorization"]),
        Case(name: "authorization not bearer", reason: .invalidProviderToken, headers: [("authorization", "basic abc")], drop: ["authorization"]),
        Case(name: "token from an unknown key", reason: .invalidProviderToken, keyID: "KEY9999999"),
        Case(name: "token naming another team", reason: .unrelatedKeyIDInToken, teamID: "TEAM999999"),
        Case(name: "token older than an hour", reason: .expiredProviderToken, issuedAgo: 3601),
        Case(name: "no apns-topic", reason: .missingTopic, drop: ["apns-topic"]),
        Case(name: "topic not allowed for the key", reason: .topicDisallowed, headers: [("apns-topic", "com.other")], drop: ["apns-topic"]),
        Case(name: "unknown push type", reason: .invalidPushType, headers: [("apns-push-type", "shout")], drop: ["apns-push-type"]),
        Case(name: "priority 7", reason: .badPriority, headers: [("apns-priority", "7")], drop: ["apns-priority"]),
        Case(name: "expiration not a number", reason: .badExpirationDate, headers: [("apns-expiration", "soon")], drop: ["apns-expiration"]),
        Case(name: "collapse id of 65 bytes", reason: .badCollapseID, headers: [("apns-collapse-id", String(repeating: "c", count: 65))]),
        Case(name: "empty payload", reason: .payloadEmpty, body: []),
        Case(name: "4097-byte payload", reason: .payloadTooLarge, body: [UInt8](repeating: 0x20, count: 4097)),
        Case(name: "unregistered token", reason: .unregistered, path: "/3/device/" + gone),
        Case(name: "unknown token", reason: .badDeviceToken, path: "/3/device/" + token(4)),
        Case(name: "token of another topic", reason: .deviceTokenNotForTopic, path: "/3/device/" + other),
    ]

    @Test(arguments: cases)
    func check(_ c: Case) async throws {
        let apns = try await LocalAPNs.start(devices: [Self.known: LocalAPNs.topic, Self.other: "com.other.app"])
        apns.server.rules.unregister(Self.gone)
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMBytes(Array(apns.server.authority.caPEM.utf8)))]
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.httpVersion = .automatic
        let key = try APNsSigningKey(pem: Data(apns.key.privateKey.pemRepresentation.utf8), keyID: c.keyID, teamID: c.teamID)
        let jwt = try ProviderToken.make(key: key, issuedAt: Int64(Date().timeIntervalSince1970) - c.issuedAgo)
        var request = HTTPClientRequest(url: apns.baseURL + (c.path ?? "/3/device/" + Self.known))
        request.method = c.method
        let standard: [(String, String)] = [
            ("authorization", "bearer " + jwt), ("apns-topic", LocalAPNs.topic), ("apns-push-type", "alert"),
            ("apns-priority", "10"), ("apns-expiration", "0"), ("apns-id", UUID().uuidString),
        ]
        for (name, value) in standard where !c.drop.contains(name) { request.headers.add(name: name, value: value) }
        for (name, value) in c.headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: c.body ?? Array(#"{"aps":{"alert":"x"}}"#.utf8)))
        let http = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        let body: [UInt8], response: HTTPClientResponse
        do {
            response = try await http.execute(request, timeout: .seconds(60))
            body = Array(try await response.body.collect(upTo: 4096).readableBytesView)
        } catch {
            // A client released running traps in a debug build of AsyncHTTPClient: shut it down first.
            try? await http.shutdown()
            await apns.stop()
            throw error
        }
        let rejection = APNsClient.rejection(status: Int(response.status.code), apnsID: response.headers.first(name: "apns-id"), body: body)
        #expect(rejection.reason == c.reason, "\(String(decoding: body, as: UTF8.self))")
        #expect(rejection.status == c.reason.status)
        if c.reason == .unregistered { #expect(rejection.timestamp != nil) }
        try await http.shutdown()
        await apns.stop()
    }

    @Test func aRenewedTokenWithinTwentyMinutesOnOneConnectionIsRefused() async throws {
        let apns = try await LocalAPNs.start(devices: [Self.known: LocalAPNs.topic])
        let rules = apns.server.rules
        let connection = LocalAPNsConnection()
        func request(_ issuedAt: Int64) throws -> LocalAPNsRequest {
            LocalAPNsRequest(method: "POST", path: "/3/device/" + Self.known, headers: [
                ("authorization", "bearer " + (try ProviderToken.make(key: apns.key, issuedAt: issuedAt))), ("apns-topic", LocalAPNs.topic),
            ], body: Array("{}".utf8))
        }
        let now = Int64(Date().timeIntervalSince1970)
        guard case .accepted = rules.answer(try request(now - 60), on: connection) else { Issue.record("first token refused"); return }
        guard case let .rejected(reason, _, _) = rules.answer(try request(now), on: connection) else { Issue.record("second token accepted"); return }
        #expect(reason == .tooManyProviderTokenUpdates)
        guard case .accepted = rules.answer(try request(now), on: LocalAPNsConnection()) else { Issue.record("a new connection refused it"); return }
        await apns.stop()
    }
}
