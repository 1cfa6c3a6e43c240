import Metrics
public import Prometheus
import NIOConcurrencyHelpers

/// The gateway's metrics (gateway v1 §7), through swift-metrics into its own Prometheus registry (so several
/// gateways in one process, as in tests, do not share counters). No label holds a token, device id or user id.
public final class GatewayMetrics: Sendable {
    /// The registry `/metrics` prints.
    public let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory

    /// Metrics in a new registry.
    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
        ]
        self.factory = factory
    }

    /// The counters and timers already made, by label and dimension values: making one through the factory takes
    /// the registry's lock and checks and sorts its labels, several times per message otherwise.
    let counters = NIOLockedValueBox<[String: Metrics.Counter]>([:])
    let timers = NIOLockedValueBox<[String: Metrics.Timer]>([:])

    func counter(_ label: String, _ dimensions: [(String, String)]) -> Metrics.Counter {
        Self.cached(counters, Self.key(label, dimensions)) { Metrics.Counter(label: label, dimensions: dimensions, factory: factory) }
    }

    func timer(_ label: String, _ dimensions: [(String, String)]) -> Metrics.Timer {
        Self.cached(timers, Self.key(label, dimensions)) { Metrics.Timer(label: label, dimensions: dimensions, factory: factory) }
    }

    /// The handle in `cache` under `key`, made (outside the lock) and kept the first time.
    static func cached<Handle: Sendable>(_ cache: NIOLockedValueBox<[String: Handle]>, _ key: String, make: () -> Handle) -> Handle {
        if let made = cache.withLockedValue({ $0[key] }) { return made }
        let made = make()
        return cache.withLockedValue { entries in
            if let raced = entries[key] { return raced }
            entries[key] = made
            return made
        }
    }

    static func key(_ label: String, _ dimensions: [(String, String)]) -> String {
        var key = label
        for (_, value) in dimensions { key += "\u{0}" + value }
        return key
    }

    /// `sealedpush_gateway_messages_total{app}`.
    func message(app: String) {
        counter("sealedpush_gateway_messages_total", [("app", app)]).increment()
    }

    /// `sealedpush_gateway_deliveries_total{app,platform,state}`: a transition into `state` of deliveries through
    /// `platform`.
    func delivery(app: String, platform: PushPlatform, state: DeliveryState, count: Int = 1) {
        delivery(app: app, platformLabel: platform.rawValue, state: state, count: count)
    }

    /// `sealedpush_gateway_deliveries_total{app,platform="",state}`: transitions counted in bulk over deliveries of
    /// any platform (a message's, a user's or a device's cancellations; a mailbox fetch), whose platform is not at
    /// hand. An empty label is no label to Prometheus: `sum by (app, state)` still counts them.
    func delivery(app: String, state: DeliveryState, count: Int = 1) {
        delivery(app: app, platformLabel: "", state: state, count: count)
    }

    func delivery(app: String, platformLabel: String, state: DeliveryState, count: Int) {
        guard count > 0 else { return }
        counter("sealedpush_gateway_deliveries_total", [("app", app), ("platform", platformLabel), ("state", state.rawValue)])
            .increment(by: count)
    }

    /// `sealedpush_apns_requests_total{app,status,reason}` and `sealedpush_apns_request_duration_seconds{app}`.
    func apnsRequest(app: String, status: String, reason: String, duration: Duration) {
        counter("sealedpush_apns_requests_total", [("app", app), ("status", status), ("reason", reason)])
            .increment()
        timer("sealedpush_apns_request_duration_seconds", [("app", app)]).record(duration: duration)
    }

    /// `sealedpush_push_requests_total{app,platform,status,reason}` and `sealedpush_push_request_duration_seconds{app,platform}`
    /// (platforms v1 §4), and for `apns` also the APNs families above (their names stay).
    func pushRequest(app: String, platform: PushPlatform, status: String, reason: String, duration: Duration) {
        counter("sealedpush_push_requests_total", [("app", app), ("platform", platform.rawValue), ("status", status), ("reason", reason)])
            .increment()
        timer("sealedpush_push_request_duration_seconds", [("app", app), ("platform", platform.rawValue)]).record(duration: duration)
        if platform == .apns { apnsRequest(app: app, status: status, reason: reason, duration: duration) }
    }

    /// `sealedpush_gateway_queue_oldest_seconds{app}`: how long the app's oldest queued delivery has waited.
    func queueOldest(app: String, oldestSeconds: Double) {
        Gauge(label: "sealedpush_gateway_queue_oldest_seconds", dimensions: [("app", app)], factory: factory).record(oldestSeconds)
    }

    /// `sealedpush_gateway_queue_depth{app,platform}`: the app's deliveries to `platform` queued.
    func queueDepth(app: String, platform: PushPlatform, depth: Int) {
        Gauge(label: "sealedpush_gateway_queue_depth", dimensions: [("app", app), ("platform", platform.rawValue)], factory: factory).record(depth)
    }

    /// `sealedpush_gateway_app_paused{app,platform}`: 1 while the push service of `platform` refuses the app's
    /// credentials (its deliveries there stay queued), else 0.
    func paused(app: String, platform: PushPlatform, _ paused: Bool) {
        Gauge(label: "sealedpush_gateway_app_paused", dimensions: [("app", app), ("platform", platform.rawValue)], factory: factory)
            .record(paused ? 1 : 0)
    }

    /// `sealedpush_webpush_origin_paused{app,origin}`: 1 while an app's Web Push to a push service origin is paused
    /// by its subscriptions' refusals (platforms v1 §3); only origins that were paused get a series.
    func originPaused(app: String, origin: String, _ paused: Bool) {
        Gauge(label: "sealedpush_webpush_origin_paused", dimensions: [("app", app), ("origin", origin)], factory: factory).record(paused ? 1 : 0)
    }

    /// `sealedpush_gateway_connections_refused_total{listener}`: connections closed at once because their source
    /// already held `http.max_connections_per_source` of that listener's.
    func connectionRefused(listener: String) {
        counter("sealedpush_gateway_connections_refused_total", [("listener", listener)]).increment()
    }

    /// Declares `listener`'s refusal counter at zero, so that the series is on `/metrics` from the start.
    func declareConnectionRefusals(listener: String) {
        _ = counter("sealedpush_gateway_connections_refused_total", [("listener", listener)])
    }

    /// `sealedpush_gateway_http_requests_total{route,status}` and `sealedpush_gateway_http_request_duration_seconds{route}`.
    func http(route: String, status: Int, duration: Duration) {
        counter("sealedpush_gateway_http_requests_total", [("route", route), ("status", String(status))])
            .increment()
        timer("sealedpush_gateway_http_request_duration_seconds", [("route", route)]).record(duration: duration)
    }

    /// `sealedpush_receipts_total{app,type,reason}`.
    func receipt(app: String, type: String, reason: String) {
        counter("sealedpush_receipts_total", [("app", app), ("type", type), ("reason", reason)]).increment()
    }

    /// `sealedpush_gateway_webhook_requests_total{app,status}`: webhook attempts by the receiver's status (`none`: no answer).
    func webhookRequest(app: String, status: String) {
        counter("sealedpush_gateway_webhook_requests_total", [("app", app), ("status", status)]).increment()
    }

    /// `sealedpush_gateway_listener_connected`: whether the store's listener (PostgreSQL `LISTEN`) is connected (1)
    /// or the workers only poll (0); `sealedpush_gateway_listener_lost_total`: how often it was lost or failed.
    func listener(connected: Bool) {
        Gauge(label: "sealedpush_gateway_listener_connected", dimensions: [], factory: factory).record(connected ? 1 : 0)
        if !connected { counter("sealedpush_gateway_listener_lost_total", []).increment() }
    }

    /// `sealedpush_gateway_webhook_dropped_total{app}`: events given up after the retry window (gateway v1 §8).
    func webhookDropped(app: String) {
        counter("sealedpush_gateway_webhook_dropped_total", [("app", app)]).increment()
    }

    /// Declares `app`'s series at zero, so that every documented family is on `/metrics` from the start (an alert on
    /// `increase(…_dropped_total[1h])` needs the series before its first increment): messages, deliveries by each
    /// state and platform the app serves, and webhook events dropped. Idempotent; called at start and on reload.
    func declare(app: String, platforms: [PushPlatform]) {
        _ = counter("sealedpush_gateway_messages_total", [("app", app)])
        for platform in platforms {
            for state in DeliveryState.allCases {
                _ = counter("sealedpush_gateway_deliveries_total", [("app", app), ("platform", platform.rawValue), ("state", state.rawValue)])
            }
        }
        _ = counter("sealedpush_gateway_webhook_dropped_total", [("app", app)])
    }

    /// The Prometheus text.
    public func render() -> [UInt8] { registry.emitToBuffer() }
}
