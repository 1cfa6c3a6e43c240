import AsyncHTTPClient
import NIOConcurrencyHelpers

/// An `HTTPClient` made on first use from a fixed configuration (a device that sends nothing starts no event loop),
/// and shut down once: what the device's receipt transport and mailbox fetcher share.
final class LazyHTTPClient: Sendable {
    private let configuration: @Sendable () -> HTTPClient.Configuration
    private let made = NIOLockedValueBox<HTTPClient?>(nil)

    /// A client made from `configuration` when first asked for.
    init(_ configuration: @escaping @Sendable () -> HTTPClient.Configuration) {
        self.configuration = configuration
    }

    /// The client, made now if it was not yet.
    var client: HTTPClient {
        made.withLockedValue { made in
            if let client = made { return client }
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration())
            made = client
            return client
        }
    }

    /// Shuts the client down, if one was made.
    func shutdown() async {
        let client = made.withLockedValue { made -> HTTPClient? in
            defer { made = nil }
            return made
        }
        try? await client?.shutdown()
    }
}
