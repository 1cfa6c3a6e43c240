import NIOConcurrencyHelpers
import SealedPushCrypto

/// Which push-service origins an app's Web Push is paused at (platforms v1 §3, revision 2). A `401`/`403` from an
/// endpoint rejects that delivery only: the endpoint was chosen by whoever registered the device, so one refusal
/// says nothing certain about the app's VAPID key. When, within `window`, at least `threshold` distinct
/// subscriptions at one origin (scheme, host, port) refuse and none there accepts, the app's Web Push to that
/// origin alone is paused, until a reload (a new `AppRuntime`) or a delivery to that origin succeeds.
final class WebPushRefusals: Sendable {
    /// Distinct refusing subscriptions at one origin that pause it: 5 (platforms v1 §3).
    let threshold: Int
    /// How far back refusals count, in milliseconds: 10 minutes.
    let window: Int64
    /// Origins tracked at most (the oldest refusals give way), so that strangers' endpoints cannot grow it unbounded.
    let maximumOrigins: Int

    private struct Origin {
        /// When each refusing subscription (by a hash of its endpoint) last refused.
        var refusals: [String: Int64] = [:]
        var paused = false
        var lastSeen: Int64 = 0
        /// When a delivery was last let through to the paused origin, to see whether it accepts again.
        var lastProbe: Int64 = 0
    }

    private struct State {
        var origins: [String: Origin] = [:]
        /// Pauses and resumptions not yet reported (the delivery worker logs them and sets the metric).
        var changes: [(origin: String, paused: Bool)] = []
    }

    private let state = NIOLockedValueBox(State())

    /// How often one delivery is let through to a paused origin (milliseconds): its success resumes the origin.
    let probeInterval: Int64

    init(threshold: Int = 5, window: Duration = .seconds(600), maximumOrigins: Int = 1024, probeInterval: Duration = .seconds(300)) {
        self.threshold = max(1, threshold)
        self.window = window.milliseconds
        self.maximumOrigins = maximumOrigins
        self.probeInterval = probeInterval.milliseconds
    }

    /// Whether a delivery to `origin` at `now` (Unix ms) waits: true while the origin is paused, except for one
    /// delivery every `probeInterval`, let through so that "a delivery to that origin succeeds" (platforms v1 §3)
    /// can happen at all; its refusal keeps the origin paused, its acceptance resumes it.
    func holds(_ origin: String, now: Int64) -> Bool {
        state.withLockedValue { s -> Bool in
            guard var entry = s.origins[origin], entry.paused else { return false }
            guard now - entry.lastProbe >= probeInterval else { return true }
            entry.lastProbe = now
            s.origins[origin] = entry
            return false
        }
    }

    /// Whether deliveries to `origin` are paused.
    func isPaused(_ origin: String) -> Bool { state.withLockedValue { $0.origins[origin]?.paused ?? false } }

    /// The paused origins, sorted.
    var pausedOrigins: [String] { state.withLockedValue { $0.origins.filter(\.value.paused).map(\.key).sorted() } }

    /// Records that the subscription at `endpoint` (at `origin`) refused the app's VAPID key at `now` (Unix ms);
    /// true when this refusal paused the origin.
    @discardableResult
    func refused(origin: String, endpoint: String, now: Int64) -> Bool {
        let subscription = Hex.encode(Array(Digests.sha256(endpoint.utf8).prefix(16)))
        return state.withLockedValue { s -> Bool in
            var entry = s.origins[origin] ?? Origin()
            entry.refusals[subscription] = now
            entry.refusals = entry.refusals.filter { now - $0.value < window }
            entry.lastSeen = now
            let pauses = !entry.paused && entry.refusals.count >= threshold
            if pauses {
                entry.paused = true
                entry.lastProbe = now
                s.changes.append((origin, true))
            }
            s.origins[origin] = entry
            if s.origins.count > maximumOrigins, let oldest = s.origins.filter({ !$0.value.paused }).min(by: { $0.value.lastSeen < $1.value.lastSeen })?.key {
                s.origins[oldest] = nil
            }
            return pauses
        }
    }

    /// Records that a delivery to `origin` was accepted: its refusals are forgotten and it is no longer paused.
    func accepted(origin: String) {
        state.withLockedValue { s in
            guard let entry = s.origins.removeValue(forKey: origin) else { return }
            if entry.paused { s.changes.append((origin, false)) }
        }
    }

    /// The pauses and resumptions since the last call, in order.
    func takeChanges() -> [(origin: String, paused: Bool)] {
        state.withLockedValue { s in
            defer { s.changes = [] }
            return s.changes
        }
    }
}
