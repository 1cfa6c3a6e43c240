import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import SealedPushFCM
import Testing

/// A loopback HTTPS server: `/ok` answers FCM's 200, `/big` 100 KB, `/stall` never answers. Its certificate (for
/// 127.0.0.1) is issued by a CA that Python's `cryptography` makes, as `fcm serve --ca-out` would write one.
final class LoopbackHTTPSServer: Sendable {
    let channel: any Channel
    let port: Int
    let caFile: String
    let directory: URL

    init() async throws {
        directory = try Fixtures.temporaryDirectory()
        let script = """
        import datetime, ipaddress, sys
        from cryptography import x509
        from cryptography.x509.oid import NameOID, ExtendedKeyUsageOID
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        out = sys.stdin.read().strip()
        now = datetime.datetime.now(datetime.timezone.utc)
        start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "SealedPush FCM test CA")])
        usage = dict(digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                     key_agreement=False, encipher_only=False, decipher_only=False)
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
              .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
              .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
              .add_extension(x509.KeyUsage(key_cert_sign=True, crl_sign=True, **usage), critical=True)
              .sign(ca_key, hashes.SHA256()))
        key = ec.generate_private_key(ec.SECP256R1())
        leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(start).not_valid_after(end)
                .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        open(out + "/ca.pem", "wb").write(ca.public_bytes(serialization.Encoding.PEM))
        open(out + "/cert.pem", "wb").write(leaf.public_bytes(serialization.Encoding.PEM))
        open(out + "/key.pem", "wb").write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                              serialization.NoEncryption()))
        """
        let result = try Fixtures.runPython(script, input: Array(directory.path.utf8))
        try #require(result.status == 0, "python: \(result.stderr)")
        caFile = directory.appendingPathComponent("ca.pem").path
        let certificates = try NIOSSLCertificate.fromPEMFile(directory.appendingPathComponent("cert.pem").path)
        let key = try NIOSSLPrivateKey(file: directory.appendingPathComponent("key.pem").path, format: .pem)
        let context = try NIOSSLContext(configuration: .makeServerConfiguration(certificateChain: certificates.map { .certificate($0) },
                                                                               privateKey: .privateKey(key)))
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = try #require(channel.localAddress?.port)
    }

    func close() async {
        try? await channel.close()
        try? FileManager.default.removeItem(at: directory)
    }

    final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        var path = ""

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case let .head(head): path = head.uri
            case .body: break
            case .end:
                if path.hasSuffix("/stall") { return }
                let body = path.hasSuffix("/big") ? [UInt8](repeating: 0x61, count: 100_000) : Array(#"{"name":"projects/p/messages/1"}"#.utf8)
                var headers = HTTPHeaders()
                headers.add(name: "content-length", value: "\(body.count)")
                headers.add(name: "Retry-After", value: "7")
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}

@Suite("AsyncHTTPClient transport over loopback TLS")
struct HTTPClientTransportTests {
    /// A request with a long deadline by default: under ThreadSanitizer with the whole suite in parallel, a
    /// 10 s one expired once before the loopback server's answer.
    func request(_ port: Int, _ path: String, timeout: Duration = .seconds(60)) -> FCMHTTPRequest {
        FCMHTTPRequest(url: "https://127.0.0.1:\(port)\(path)", headers: ["authorization": "Bearer x", "content-type": "application/json"],
                       body: Array("{}".utf8), timeout: timeout, responseBodyLimit: 64 * 1024)
    }

    @Test("Trusting the local CA file: the answer, its headers (lower-cased), a capped body, a timeout")
    func trusted() async throws {
        let server = try await LoopbackHTTPSServer()
        let transport = try FCMHTTPClientTransport(caCertificateFile: server.caFile)
        do {
            let ok = try await transport.post(request(server.port, "/v1/projects/p/messages:send"))
            #expect(ok == FCMHTTPResponse(status: 200, headers: ["content-length": "32", "retry-after": "7"],
                                          body: Array(#"{"name":"projects/p/messages/1"}"#.utf8)))
            let big = try await transport.post(request(server.port, "/big"))
            #expect(big.body.count == 64 * 1024)
            #expect(big.bodyTruncated)
            let started = ContinuousClock.now
            await #expect(throws: FCMTransportError.timedOut) { try await transport.post(request(server.port, "/stall", timeout: .seconds(1))) }
            // The stalled answer never comes: returning at all shows the 1 s deadline; the bound only keeps a slow,
            // loaded machine (the whole suite in parallel) from failing it.
            #expect(ContinuousClock.now - started < .seconds(20))
        } catch {
            Issue.record("transport failed: \(error)")
        }
        await transport.shutdown()
        await server.close()
    }

    @Test("Without the CA the server is untrusted; a bad CA file is named")
    func untrusted() async throws {
        let server = try await LoopbackHTTPSServer()
        let transport = try FCMHTTPClientTransport()
        await #expect(throws: FCMTransportError.untrustedServer) { try await transport.post(request(server.port, "/ok")) }
        await transport.shutdown()
        let notPEM = server.directory.appendingPathComponent("not.pem").path
        #expect(FileManager.default.createFile(atPath: notPEM, contents: Data("hello".utf8)))
        #expect(throws: FCMClientError.self) { try FCMHTTPClientTransport(caCertificateFile: notPEM) }
        await server.close()
    }
}
