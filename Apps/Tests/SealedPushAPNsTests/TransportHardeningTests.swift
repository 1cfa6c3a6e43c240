import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushAPNsServer
import SealedPushTestSupport
import Testing

/// The provider client's transport rules from the security review: TLS 1.2 at least, extra CAs only for a
/// custom server, only transport failures retried, and the `.p8` read once, without symlinks, from a file the
/// user owns.
@Suite("APNs client: transport hardening", .serialized, .timeLimit(.minutes(5)))
struct TransportHardeningTests {
    /// A TLS server that speaks at most TLS 1.1 and nothing above it.
    static func startLegacyTLSServer(authority: LocalCertificateAuthority) async throws -> (any Channel, Int) {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(authority.serverCertificatePEM.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(authority.serverKeyPEM.utf8), format: .pem)))
        tls.maximumTLSVersion = .tlsv11
        tls.minimumTLSVersion = .tlsv1
        let context = try NIOSSLContext(configuration: tls)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return (channel, channel.localAddress?.port ?? 0)
    }

    @Test func aServerOfferingOnlyTLS11IsRefusedAtTheHandshake() async throws {
        let authority = try LocalCertificateAuthority.make()
        let (server, port) = try await Self.startLegacyTLSServer(authority: authority)
        let key = try APNsSigningKey.generateForDevelopment(keyID: "KEY0000001", teamID: "TEAM000001").key
        let client = try APNsClient(configuration: APNsClientConfiguration(
            environment: .custom("https://127.0.0.1:\(port)"), signingKey: key, topic: LocalAPNs.topic,
            trustedCertificatesPEM: [Array(authority.caPEM.utf8)], timeout: .seconds(3), retry: .init(maxTries: 1)))
        let result = await attempt(client, push(1))
        await client.shutdown()
        try await server.close()
        guard case .failure(.connection(.tlsHandshake, _)) = result else {
            Issue.record("a TLS 1.1 server was not refused at the handshake: \(result)")
            return
        }
    }

    @Test func anExtraCAIsRefusedForApplesServers() throws {
        let authority = try LocalCertificateAuthority.make()
        let key = try APNsSigningKey.generateForDevelopment(keyID: "KEY0000001", teamID: "TEAM000001").key
        for environment in [APNsClientConfiguration.Environment.production, .sandbox] {
            do {
                _ = try APNsClient(configuration: APNsClientConfiguration(
                    environment: environment, signingKey: key, trustedCertificatesPEM: [Array(authority.caPEM.utf8)]))
                Issue.record("an extra CA was accepted for \(environment)")
            } catch {
                #expect(error.description.contains("only for a local or private APNs"), "\(error.description)")
            }
        }
    }

    struct NotATransportError: Error {}

    @Test func onlyTransportFailuresAreRetried() {
        #expect(!APNsClient.isRetryable(APNsClient.classify(NotATransportError())))
        #expect(!APNsClient.isRetryable(.untrustedServer))
        #expect(!APNsClient.isRetryable(.shutDown))
        #expect(!APNsClient.isRetryable(.invalidRequest("x")))
        for failure in [ConnectionFailure.refused, .unreachable, .closed, .tlsHandshake] {
            #expect(APNsClient.isRetryable(.connection(failure, tries: 1)))
        }
        #expect(APNsClient.isRetryable(.timedOut(tries: 1)))
        #expect(APNsClient.isRetryable(APNsClient.classify(IOError(errnoCode: ECONNRESET, reason: "read"))))
    }

    @Test func theAuthKeyIsReadOnlyFromAPrivateRegularFileNotThroughASymlink() throws {
        let directory = try makeScratchDirectory("p8")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (_, pem) = try APNsSigningKey.generateForDevelopment(keyID: "KEY0000001", teamID: "TEAM000001")
        let path = directory.path() + "/AuthKey_KEY0000001.p8"
        _ = FileManager.default.createFile(atPath: path, contents: Data(pem.utf8), attributes: [.posixPermissions: 0o600])
        _ = try APNsSigningKey(p8File: path, keyID: "KEY0000001", teamID: "TEAM000001")

        let link = directory.path() + "/link.p8"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: path)
        #expect(problem(link) == .symbolicLink(path: link))
        #expect(problem(directory.path()) == .directory(path: directory.path()))
        // Each group and other bit alone is refused.
        for bit in [0o040, 0o020, 0o010, 0o004, 0o002, 0o001] {
            try FileManager.default.setAttributes([.posixPermissions: 0o600 | bit], ofItemAtPath: path)
            #expect(problem(path) == .readableByOthers(path: path, mode: 0o600 | bit))
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        let big = directory.path() + "/big.p8"
        _ = FileManager.default.createFile(atPath: big, contents: Data(count: APNsSigningKey.maximumFileSize + 1), attributes: [.posixPermissions: 0o600])
        #expect(problem(big) == .tooLarge(path: big, limit: APNsSigningKey.maximumFileSize))
        // A file another user owns (root only can make one here).
        if geteuid() == 0 {
            let theirs = directory.path() + "/theirs.p8"
            _ = FileManager.default.createFile(atPath: theirs, contents: Data(pem.utf8), attributes: [.posixPermissions: 0o600])
            #expect(chown(theirs, 65534, 65534) == 0)
            #expect(problem(theirs) == .notOwner(path: theirs))
        }
    }

    func problem(_ path: String) -> AuthKeyProblem? {
        do {
            _ = try APNsSigningKey(p8File: path, keyID: "KEY0000001", teamID: "TEAM000001")
            return nil
        } catch {
            if case let .authKey(problem) = error { return problem }
            return nil
        }
    }
}

/// The local APNs's own limits: a connection cap, and a deadline for the TLS handshake.
@Suite("Local APNs: connection limits", .serialized, .timeLimit(.minutes(10)))
struct LocalAPNsLimitTests {
    /// A raw TCP connection that never starts TLS.
    static func connect(_ port: Int) async throws -> any Channel {
        try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { $0.eventLoop.makeSucceededVoidFuture() }
            .connect(host: "127.0.0.1", port: port).get()
    }

    /// Whether `channel` is closed within `limit`.
    static func closes(_ channel: any Channel, within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if !channel.isActive { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return !channel.isActive
    }

    @Test func connectionsPastTheCapAreClosedAtOnce() async throws {
        let apns = try await LocalAPNs.start {
            $0.maxConnections = 2
            $0.handshakeTimeout = .seconds(3600)
        }
        let first = try await Self.connect(apns.port), second = try await Self.connect(apns.port)
        // Both are counted before the third arrives.
        let counted = ContinuousClock.now + .seconds(10)
        while apns.server.openConnections < 2, ContinuousClock.now < counted { try await Task.sleep(for: .milliseconds(10)) }
        let third = try await Self.connect(apns.port)
        #expect(await Self.closes(third, within: .seconds(30)), "a connection past the cap is closed at once, not at its handshake deadline an hour away")
        #expect(first.isActive && second.isActive, "the first two stay open: their handshake deadline is far off")
        try await first.close()
        try await second.close()
        await apns.stop()
    }

    @Test func aConnectionThatNeverFinishesItsHandshakeIsClosed() async throws {
        let apns = try await LocalAPNs.start { $0.handshakeTimeout = .milliseconds(300) }
        let stalled = try await Self.connect(apns.port)
        #expect(await Self.closes(stalled, within: .seconds(20)))
        await apns.stop()
    }
}
