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
    /// The app's name lookups: at most 4 at once, each abandoned after 5 s (platforms v1 §4.1).
    let lookups: AddressLookups
    let client: PinnedHTTPSClient
    /// The app's origins paused by their subscriptions' `401`/`403` (platforms v1 §3, revision 2).
    let refusals: WebPushRefusals

    /// How long a delivery to a paused origin waits before it is looked at again.
    static let pausedOriginRecheck: Duration = .seconds(30)

    /// A sender through the app's `lookups`, pausing origins in `refusals`.
    init(policy: WebPushEndpointPolicy, vapid: VAPIDTokenCache, lookups: AddressLookups, client: PinnedHTTPSClient, refusals: WebPushRefusals = WebPushRefusals()) {
        self.policy = policy
        self.vapid = vapid
        self.lookups = lookups
        self.client = client
        self.refusals = refusals
    }

    /// A sender resolving through `resolver` with the default lookup bounds.
    init(policy: WebPushEndpointPolicy, vapid: VAPIDTokenCache, resolver: any GatewayAddressResolver, client: PinnedHTTPSClient,
         refusals: WebPushRefusals = WebPushRefusals()) {
        self.init(policy: policy, vapid: vapid, lookups: AddressLookups(resolver: resolver), client: client, refusals: refusals)
    }

    func send(_ claim: ClaimedDelivery, now: Int64) async -> PushAnswer {
        let endpoint: WebPushEndpoint
        do { endpoint = try policy.check(claim.address) } catch {
            return .rejected(status: nil, reason: Self.reason(error), attempted: false)
        }
        if refusals.holds(endpoint.origin, now: now) { return .held(reason: "credentials_paused", retryAfter: Self.pausedOriginRecheck) }
        let answer = await post(claim, to: endpoint, now: now)
        switch answer {
        case .accepted: refusals.accepted(origin: endpoint.origin)
        case .rejected(401?, _, _), .rejected(403?, _, _): refusals.refused(origin: endpoint.origin, endpoint: claim.address, now: now)
        default: break
        }
        return answer
    }

    /// One attempt's request, its endpoint checked: resolve, check and connect (or reuse a kept connection), POST.
    private func post(_ claim: ClaimedDelivery, to endpoint: WebPushEndpoint, now: Int64) async -> PushAnswer {
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
            guard let found = try await lookups.addresses(of: endpoint.host) else {
                if Task.isCancelled { return .retry(status: nil, reason: "timeout", retryAfter: nil) }
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
            return .accepted(status: status, platformID: safePlatformID(response.headers.first(name: "Location")))
        case 404, 410:
            // A subscription that is gone does not come back; one registered again after this attempt began stays.
            return .unregistered(status: status, reason: status == 410 ? "gone" : "not_found", registeredBefore: now)
        case 400, 413:
            return .rejected(status: status, reason: status == 413 ? "payload_too_large" : "bad_request", attempted: true)
        case 401, 403:
            // The endpoint was chosen by whoever registered the device: its refusal rejects this delivery only
            // (platforms v1 §3, revision 2); `WebPushRefusals` pauses an origin where several subscriptions refuse.
            return .rejected(status: status, reason: "vapid_refused", attempted: true)
        case 429, 500...599:
            return .retry(status: status, reason: status == 429 ? "rate_limited" : "server_error",
                          retryAfter: retryAfter(response.headers.first(name: "Retry-After"), now: now))
        case 300...399:
            return .rejected(status: status, reason: "redirect_not_followed", attempted: true)
        default:
            return .rejected(status: status, reason: "http_\(status)", attempted: true)
        }
    }

    /// The longest `Location` kept as a delivery's `platform_id`.
    static let maximumPlatformID = 512

    /// A push service's `Location` as a delivery's `platform_id`, shown through the API, the dashboard and webhooks:
    /// the service was chosen by whoever registered the device, so only a bounded value of URL characters is kept
    /// (at most `maximumPlatformID` bytes of letters, digits and `-._~:/?#@!$&+,;=%`); anything else is dropped (nil).
    static func safePlatformID(_ location: String?) -> String? {
        guard let location else { return nil }
        let value = String(Substring(location).trimmingASCIISpaces())
        guard !value.isEmpty, value.utf8.count <= maximumPlatformID, value.utf8.allSatisfy(isURLCharacter) else { return nil }
        return value
    }

    /// The punctuation a kept `Location` may hold besides letters and digits.
    static let urlPunctuation: Set<UInt8> = Set("-._~:/?#@!$&+,;=%".utf8)

    /// Whether `c` is a letter, a digit or one of `urlPunctuation`.
    static func isURLCharacter(_ c: UInt8) -> Bool {
        let digit = c >= 0x30 && c <= 0x39
        let upper = c >= 0x41 && c <= 0x5A
        let lower = c >= 0x61 && c <= 0x7A
        return digit || upper || lower || urlPunctuation.contains(c)
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
    /// `limit`: a resolver that hangs, even one that ignores cancellation, holds neither a registration nor a
    /// delivery slot longer (the lookup is abandoned, never awaited).
    static func addresses(of host: String, resolver: any GatewayAddressResolver, within limit: Duration = .seconds(5)) async throws -> [[UInt8]]? {
        try await AddressLookups(resolver: resolver, deadline: limit).addresses(of: host)
    }

    /// A host without the brackets of an IPv6 literal.
    static func unbracketed(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }
}
