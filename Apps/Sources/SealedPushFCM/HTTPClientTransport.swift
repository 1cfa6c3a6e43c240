import AsyncHTTPClient
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import NIOHTTP1
import NIOSSL

/// `FCMTransport` over AsyncHTTPClient: HTTPS with TLS 1.2 at least, the system's trust roots plus, for a local FCM,
/// the CA certificates of one PEM file; no redirects; no connect retries of its own (the gateway's backoff decides).
public final class FCMHTTPClientTransport: FCMTransport {
    let client: HTTPClient

    /// A transport with its own HTTP client.
    ///
    /// - Parameters:
    ///   - caCertificateFile: a PEM file of CA certificates trusted besides the system's (`fcm.ca_cert`, for
    ///     `sealedpush-server fcm serve`), or `nil`.
    ///   - connectTimeout: the longest a connection may take to open.
    /// - Throws: `FCMClientError.caCertificate` when the file cannot be read or holds no PEM certificate.
    public init(caCertificateFile: String? = nil, connectTimeout: Duration = .seconds(5)) throws(FCMClientError) {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        // Closing waits at most a second for the server's close_notify (NIOSSL's default, 5 s, held up `shutdown()`
        // for 5 s after a request that timed out: half the gateway's SIGTERM budget).
        tls.shutdownTimeout = .seconds(1)
        if let caCertificateFile {
            guard let data = FileManager.default.contents(atPath: caCertificateFile) else {
                throw .caCertificate(path: caCertificateFile, problem: "it does not exist or is not readable")
            }
            let certificates: [NIOSSLCertificate]
            do { certificates = try NIOSSLCertificate.fromPEMBytes(Array(data)) } catch {
                throw .caCertificate(path: caCertificateFile, problem: "it is not a PEM certificate")
            }
            guard !certificates.isEmpty else { throw .caCertificate(path: caCertificateFile, problem: "it holds no certificate") }
            tls.additionalTrustRoots = [.certificates(certificates)]
        }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            timeout: .init(connect: .milliseconds(Self.milliseconds(connectTimeout)), read: nil))
        configuration.connectionPool.retryConnectionEstablishment = false
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Closes the connections; call once when done.
    public func shutdown() async {
        try? await client.shutdown()
    }

    /// POSTs `request`; the whole exchange, answer body included, must finish within its timeout.
    public func post(_ request: FCMHTTPRequest) async throws(FCMTransportError) -> FCMHTTPResponse {
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = .POST
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        outgoing.body = .bytes(ByteBuffer(bytes: request.body))
        let deadline = NIODeadline.now() + .milliseconds(Self.milliseconds(request.timeout))
        let client = self.client, prepared = outgoing
        let limit = request.responseBodyLimit
        let outcome: Result<FCMHTTPResponse, FCMTransportError> = await withTaskGroup(of: Result<FCMHTTPResponse, FCMTransportError>?.self) { group in
            group.addTask {
                do {
                    let response = try await client.execute(prepared, deadline: deadline)
                    var headers: [String: String] = [:]
                    for field in response.headers {
                        let name = field.name.lowercased()
                        headers[name] = headers[name].map { $0 + ", " + field.value } ?? field.value
                    }
                    var body: [UInt8] = []
                    var truncated = false
                    for try await chunk in response.body {
                        let room = limit - body.count
                        if chunk.readableBytes > room {
                            body += chunk.readableBytesView.prefix(room)
                            truncated = true
                            break
                        }
                        body += chunk.readableBytesView
                    }
                    return .success(FCMHTTPResponse(status: Int(response.status.code), headers: headers, body: body, bodyTruncated: truncated))
                } catch {
                    return .failure(Self.classify(error))
                }
            }
            group.addTask {
                try? await Task.sleep(for: request.timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .failure(Task.isCancelled ? .cancelled : .timedOut)
        }
        return try outcome.get()
    }

    static func milliseconds(_ d: Duration) -> Int64 {
        d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
    }

    /// What went wrong, in words that hold neither the URL nor any header.
    static func classify(_ error: any Error) -> FCMTransportError {
        if error is CancellationError { return .cancelled }
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout: return .timedOut
            case .cancelled, .alreadyShutdown: return .cancelled
            case .remoteConnectionClosed: return .connection("the server closed the connection")
            default: return .connection("\(error)")
            }
        }
        if error is NIOSSLExtraError { return .untrustedServer }
        if let error = error as? NIOSSLError {
            if case let .handshakeFailed(reason) = error, case let .sslError(errors) = reason,
               errors.contains(where: { "\($0)".contains("CERTIFICATE_VERIFY_FAILED") }) {
                return .untrustedServer
            }
            return .connection("TLS handshake failed")
        }
        if let error = error as? IOError {
            switch error.errnoCode {
            case ECONNREFUSED: return .connection("connection refused")
            case ECONNRESET, EPIPE: return .connection("connection reset")
            default: return .connection("I/O error \(error.errnoCode)")
            }
        }
        if String(describing: error).contains("(errno: \(ECONNREFUSED))") { return .connection("connection refused") }
        return .connection(String(describing: type(of: error)))
    }
}
