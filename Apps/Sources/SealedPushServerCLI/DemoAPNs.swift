// The demo's delivery part (issue #12): a local APNs on loopback, the provider client with a development
// auth key, and the phone's token registered to the device store.
import SealedPushCLI
import SealedPushDevice
import SealedPushKeychain
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushAPNsServer
import SealedPushSender
import SealedPushWire

/// A local APNs and a client for it: what `sealedpush-server apns serve` and `sealedpush send` do, in process. The
/// server runs as a service in a background group, stopped gracefully.
final class DemoAPNs: Sendable {
    static let topic = "com.example.secretmessages"
    let server: LocalAPNsServer
    let services: BackgroundServices
    let client: APNsClient
    let phoneToken: String
    let received: AsyncStream<AcceptedPush>

    private init(server: LocalAPNsServer, services: BackgroundServices, client: APNsClient, phoneToken: String,
                 received: AsyncStream<AcceptedPush>) {
        self.server = server
        self.services = services
        self.client = client
        self.phoneToken = phoneToken
        self.received = received
    }

    /// Starts a local APNs with a fresh development key and one phone token; `nil` if it cannot start.
    static func start(logger: Logger) async -> DemoAPNs? {
        guard let key = try? APNsSigningKey.generateForDevelopment(keyID: "DEMO000KEY", teamID: "DEMOTEAM00").key,
              let authority = try? LocalCertificateAuthority.make() else { return nil }
        let phoneToken = (0..<32).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
        let configuration = LocalAPNsConfiguration(
            port: 0, keys: [.init(keyID: key.keyID, teamID: key.teamID, publicKey: key.privateKey.publicKey, topics: [topic])],
            devices: [phoneToken: topic])
        let (received, continuation) = AsyncStream<AcceptedPush>.makeStream()
        let server = LocalAPNsServer(configuration: configuration, authority: authority, logger: logger) { continuation.yield($0) }
        guard let port = try? await server.start() else { return nil }
        let services = BackgroundServices([server], logger: logger)
        guard let client = try? APNsClient(configuration: APNsClientConfiguration(
            environment: .custom("https://127.0.0.1:\(port)"), signingKey: key, topic: topic,
            trustedCertificatesPEM: [Array(authority.caPEM.utf8)]), logger: logger)
        else {
            await services.stop()
            return nil
        }
        return DemoAPNs(server: server, services: services, client: client, phoneToken: phoneToken, received: received)
    }

    /// Sends `payload` to the phone's token; returns what the phone received, or APNs's refusal.
    func deliver(_ payload: [UInt8], expiration: Int64) async -> Result<AcceptedPush, APNsError> {
        let push = APNsPush(deviceToken: phoneToken, payload: payload, topic: DemoAPNs.topic, expiration: expiration)
        do {
            _ = try await client.send(push)
        } catch {
            return .failure(error)
        }
        for await accepted in received { return .success(accepted) }
        return .failure(.shutDown)
    }

    /// Shuts the client down, then the server (gracefully: GOAWAY, in-flight pushes answered).
    func stop() async {
        await client.shutdown()
        await services.stop()
    }
}

extension Demo {
    /// Delivers through the local APNs when there is one (else straight to the device), showing the result.
    mutating func deliverThroughAPNs(_ payload: [UInt8], expiration: Int64, store: KeychainStore) async throws -> DeliveryResult {
        guard let apns else { return await deliver(payload, store: store) }
        switch await apns.deliver(payload, expiration: expiration) {
        case let .success(push): return await deliver(push.payload, store: store)
        case let .failure(error): throw CLIError("demo could not deliver through the local APNs: \(error.description)")
        }
    }

    /// The phone's app is removed: APNs unregisters its token, and the next push answers 410.
    mutating func unregisteredToken(_ payload: [UInt8]) async {
        guard let apns else { return }
        heading("The app is removed from the phone: APNs answers 410 Unregistered")
        apns.server.rules.unregister(apns.phoneToken)
        switch await apns.deliver(payload, expiration: 0) {
        case .success: note("(the push was accepted; a real APNs would answer 410)")
        case let .failure(.rejected(rejection)):
            note("sealedpush send …  →  " + style.bold("\(rejection.status) \(rejection.reason.rawValue)")
                 + " (token invalid since \(rejection.timestamp.map(String.init) ?? "?") ms)")
            note("\"unregistered\": true: " + style.bold("stop sending to this device token") + " and drop it from the database.")
        case let .failure(error): note("refused: \(error.description)")
        }
    }
}
