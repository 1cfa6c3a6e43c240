import SealedPushCLI
import ArgumentParser
import AsyncHTTPClient
import Dispatch
import Foundation
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

extension GatewayCommand {
    /// `sealedpush-server gateway probe`: a health check through the binary itself (a container image without curl).
    struct Probe: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "probe",
            abstract: "Ask a gateway's /readyz (or /healthz): exit 0 when it answers 200, 1 otherwise (a container's HEALTHCHECK).",
            discussion: """
                GETs --url with a hard deadline (--timeout, 5 s by default): a connection, a TLS handshake or an \
                answer that does not finish by then is a failure, and the process ends then whatever the network \
                does. Exit 0 on 200; exit 1 on any other status, no answer, or a refused connection, with one line \
                on stderr saying which (the answer's first bytes for a 503: the reason /readyz gives). Redirects \
                are not followed. Nothing is printed on success.

                Example (deploy/Containerfile's HEALTHCHECK): sealedpush-server gateway probe --url http://127.0.0.1:9090/readyz
                """)
        @Option(help: ArgumentHelp("The URL to GET: http(s), e.g. the admin listener's /readyz.", valueName: "URL"))
        var url: String
        @Option(help: ArgumentHelp("The hard deadline of the whole probe, in seconds (0.1 to 60).", valueName: "SECONDS"))
        var timeout: Double = 5

        func validate() throws {
            guard (0.1...60).contains(timeout) else { throw ValidationError("--timeout must be between 0.1 and 60 seconds; it was \(timeout).") }
            guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), ["http", "https"].contains(scheme),
                  let host = parsed.host, !host.isEmpty else {
                throw ValidationError("--url must be an absolute http or https URL, like http://127.0.0.1:9090/readyz; it was \(url).")
            }
        }

        func run() async throws {
            let url = self.url, seconds = self.timeout
            let milliseconds = Int64(seconds * 1000)
            // The hard stop: whatever a stalled peer or resolver does, the process ends a moment after the deadline.
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(milliseconds) + 1000)) {
                StandardIO.writeError("not ready: no answer from \(url) within \(seconds) s\n")
                _exit(1)
            }
            var configuration = HTTPClient.Configuration()
            configuration.redirectConfiguration = .disallow
            configuration.connectionPool.retryConnectionEstablishment = false
            configuration.timeout = .init(connect: .milliseconds(milliseconds), read: .milliseconds(milliseconds))
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            var request = HTTPClientRequest(url: url)
            request.method = .GET
            request.headers.add(name: "User-Agent", value: "sealedpush-probe")
            let outcome: (status: Int, body: String)?
            let why: String
            do {
                let response = try await client.execute(request, timeout: .milliseconds(milliseconds))
                let body = try await response.body.collect(upTo: 4096)
                outcome = (Int(response.status.code), String(decoding: body.readableBytesView.prefix(300), as: UTF8.self))
                why = ""
            } catch {
                outcome = nil
                why = "\(error)"
            }
            try? await client.shutdown()
            switch outcome {
            case .some((200, _)):
                return
            case let .some((status, body)):
                StandardIO.writeError("not ready: \(url) answered \(status)\(body.isEmpty ? "" : ": " + body)\n")
            case .none:
                StandardIO.writeError("not ready: no answer from \(url) (\(why))\n")
            }
            throw ExitCode(1)
        }
    }
}
