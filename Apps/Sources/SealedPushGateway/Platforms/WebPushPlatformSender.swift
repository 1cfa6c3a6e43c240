import NIOHTTP1
import SealedPushWebPush
import SealedPushWire
import SealedPushReceiver

/// Web Push (platforms v1 §3): POSTs a delivery's RFC 8291 body to its subscription's endpoint with `TTL`,
/// `Urgency`, `Topic`, `Content-Encoding: aes128gcm` and the app's VAPID `Authorization`, after resolving the
/// endpoint's host itself and checking every address by the endpoint rules of §1.1 (at each connection, as at
/// registration); it connects only to an address it checked, follows no redirect and reads at most 4 KiB of
/// an answer. Connections are kept alive per host between deliveries (`PinnedHTTPSClient`): a kept one went to
/// an address checked when it was made.
struct WebPushPlatformSender: PlatformSender {
    let policy: WebPushEndpointPolicy
    let vapid: VAPIDTokenCache
    let resolver: any GatewayAddressResolver
    let client: PinnedHTTPSClient

    func send(_ claim: ClaimedDelivery, now: Int64) async -> PushAnswer {
        let endpoint: WebPushEndpoint
        do { endpoint = try policy.check(claim.address) } catch {
            return .rejected(status: nil, reason: Self.reason(error), attempted: false)
        }
        let authorization: String
        do { authorization = try vapid.authorization(origin: endpoint.origin) } catch {
            return .paused(status: nil, reason: "vapid_key")
        }
        let ttl = claim.apnsExpiration == 0 ? 0 : WebPushRequest.ttl(expiresAt: claim.expiresAt / 1000, now: now / 1000)
        let headers = WebPushRequest.headers(ttl: ttl, urgency: WebPushUrgency(priority: claim.priority) ?? .high,
                                             topic: WebPushRequest.topic(collapseID: claim.collapseID), authorization: authorization)
        let path = HTTPURL(endpoint.url)?.pathAndQuery ?? "/"
        let host = Self.unbracketed(endpoint.host)
        let requestHeaders = headers.map { ($0.name, $0.value) } + [("Content-Type", "application/octet-stream")]
        // A connection kept from an earlier request to this host went to an address checked when it was made. One
        // the service closed meanwhile fails before any answer: then resolve, check and connect anew.
        switch await client.postOnKeptConnection(host: host, port: endpoint.port, path: path, headers: requestHeaders, body: claim.payload) {
        case let .success(response)?: return Self.classify(response, now: now)
        case .failure(.timedOut)?: return .retry(status: nil, reason: "timeout", retryAfter: nil)
        case .failure?, nil: break
        }
        let addresses: [[UInt8]]
        do {
            guard let found = try await Self.addresses(of: endpoint.host, resolver: resolver) else {
                return .retry(status: nil, reason: "dns_timeout", retryAfter: nil)
            }
            addresses = found
            try policy.checkAddresses(addresses, origin: endpoint.origin)
        } catch let error as WebPushError {
            // No address is not a refusal for good: the name may come back.
            if case .endpoint(.noAddresses) = error { return .retry(status: nil, reason: "dns", retryAfter: nil) }
            return .rejected(status: nil, reason: Self.reason(error), attempted: false)
        } catch {
            return .retry(status: nil, reason: "dns", retryAfter: nil)
        }
        // The first address that answers; a failed connection tries the next (all of them were checked).
        var failure = PinnedHTTPSClient.Failure.connection
        for address in addresses.prefix(4) {
            do {
                let response = try await client.post(host: host, port: endpoint.port, address: address, path: path,
                                                     headers: requestHeaders, body: claim.payload)
                return Self.classify(response, now: now)
            } catch {
                failure = error
                if error == .timedOut { break }
            }
        }
        switch failure {
        case .timedOut: return .retry(status: nil, reason: "timeout", retryAfter: nil)
        case .connection: return .retry(status: nil, reason: "connection", retryAfter: nil)
        case .untrusted: return .retry(status: nil, reason: "untrusted_server", retryAfter: nil)
        }
    }

    func shutdown() async { client.shutdown() }

    /// What a push service's answer means (platforms v1 §3).
    static func classify(_ response: PinnedHTTPSClient.Response, now: Int64) -> PushAnswer {
        let status = response.status
        switch status {
        case 200, 201, 202:
            return .accepted(status: status, platformID: response.headers.first(name: "Location").map { String($0.prefix(2048)) })
        case 404, 410:
            // A subscription that is gone does not come back; one registered again after this attempt began stays.
            return .unregistered(status: status, reason: status == 410 ? "gone" : "not_found", registeredBefore: now)
        case 400, 413:
            return .rejected(status: status, reason: status == 413 ? "payload_too_large" : "bad_request", attempted: true)
        case 401, 403:
            return .paused(status: status, reason: status == 401 ? "vapid_unauthorized" : "vapid_forbidden")
        case 429, 500...599:
            return .retry(status: status, reason: status == 429 ? "rate_limited" : "server_error",
                          retryAfter: retryAfter(response.headers.first(name: "Retry-After"), now: now))
        case 300...399:
            return .rejected(status: status, reason: "redirect_not_followed", attempted: true)
        default:
            return .rejected(status: status, reason: "http_\(status)", attempted: true)
        }
    }

    /// The delivery reason for an endpoint refused by the rules: `endpoint_not_public` or `invalid_endpoint`.
    static func reason(_ error: any Error) -> String {
        if case let .endpoint(problem)? = error as? WebPushError { return problem.reason }
        return "invalid_endpoint"
    }

    /// `Retry-After` (delay-seconds or an HTTP date) as a wait, capped at an hour; nil when absent or unreadable.
    static func retryAfter(_ value: String?, now: Int64) -> Duration? {
        guard let value, let seconds = RetryAfter.seconds(value, now: now / 1000) else { return nil }
        return .seconds(min(seconds, 3600))
    }

    /// `host`'s addresses (brackets of an IPv6 literal taken off), or nil when the resolver did not answer within
    /// `limit`: a resolver that hangs holds neither a registration nor a delivery slot longer.
    static func addresses(of host: String, resolver: any GatewayAddressResolver, within limit: Duration = .seconds(5)) async throws -> [[UInt8]]? {
        let name = unbracketed(host)
        return try await withThrowingTaskGroup(of: [[UInt8]]?.self) { group in
            group.addTask { try await resolver.addresses(of: name) }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    /// A host without the brackets of an IPv6 literal.
    static func unbracketed(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }
}
