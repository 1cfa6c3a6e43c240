import NIOConcurrencyHelpers
package import SealedPushTime

/// A token bucket holding at most `capacity` tokens, refilled continuously at `refillPerSecond`, read on the
/// monotonic reading of an injected `SealedPushClock` (tests pass a `SealedPushManualClock`, so a slow machine does not refill it).
package final class TokenBucket: Sendable {
    let capacity: Double
    let refillPerSecond: Double
    let clock: SealedPushClock
    let state: NIOLockedValueBox<(tokens: Double, last: ContinuousClock.Instant)>

    /// A full bucket of `capacity` tokens (at least 1) refilled at `refillPerSecond`.
    package init(capacity: Int, refillPerSecond: Double, clock: SealedPushClock = .system) {
        self.capacity = Double(max(1, capacity))
        self.refillPerSecond = refillPerSecond
        self.clock = clock
        state = NIOLockedValueBox((Double(max(1, capacity)), clock.monotonic()))
    }

    func now() -> ContinuousClock.Instant { clock.monotonic() }

    /// A bucket `perSecond` deep refilled at `perSecond` a second (a request rate a second).
    package convenience init(perSecond: Int, clock: SealedPushClock = .system) {
        self.init(capacity: perSecond, refillPerSecond: Double(max(1, perSecond)), clock: clock)
    }

    private func refilled(_ tokens: Double, since last: ContinuousClock.Instant, at now: ContinuousClock.Instant) -> Double {
        let elapsed = last.duration(to: now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return min(capacity, tokens + max(0, seconds) * refillPerSecond)
    }

    /// The whole tokens left now (nothing is taken); nil when none is.
    package var available: Int? {
        state.withLockedValue { s in
            let tokens = refilled(s.tokens, since: s.last, at: now())
            return tokens >= 1 ? Int(tokens) : nil
        }
    }

    /// Whether it has refilled completely (its source has been idle long enough).
    package var isFull: Bool {
        state.withLockedValue { s in refilled(s.tokens, since: s.last, at: now()) >= capacity }
    }

    /// Whether a token is left now (nothing is taken).
    package var hasToken: Bool {
        state.withLockedValue { s in refilled(s.tokens, since: s.last, at: now()) >= 1 }
    }

    /// Takes a token if one is left; the whole tokens left afterwards, or nil when empty.
    package func take() -> Int? {
        state.withLockedValue { s in
            let now = self.now()
            s.tokens = refilled(s.tokens, since: s.last, at: now)
            s.last = now
            guard s.tokens >= 1 else { return nil }
            s.tokens -= 1
            return Int(s.tokens)
        }
    }
}

/// One token bucket per source address, bounded in size: when full, the buckets of sources idle long enough
/// to be full again are dropped, so a flood of addresses cannot grow it without limit; while every tracked
/// source is active, a new source is refused rather than resetting the others.
package final class SourceRateLimiter: Sendable {
    let capacity: Int
    let refillPerSecond: Double
    let clock: SealedPushClock
    let buckets = NIOLockedValueBox<[String: TokenBucket]>([:])
    /// The most sources tracked at once.
    package static let maxSources = 10_000

    /// Buckets of `capacity` tokens refilled at `refillPerSecond`, per source, on `clock`'s monotonic reading.
    package init(capacity: Int, refillPerSecond: Double, clock: SealedPushClock = .system) {
        self.capacity = capacity
        self.refillPerSecond = refillPerSecond
        self.clock = clock
    }

    /// `perSecond` requests a second per source.
    package convenience init(perSecond: Int, clock: SealedPushClock = .system) {
        self.init(capacity: perSecond, refillPerSecond: Double(max(1, perSecond)), clock: clock)
    }

    /// Takes a token from `source`'s bucket; false when it is empty or no bucket can be made for it.
    package func admit(_ source: String) -> Bool {
        bucket(for: source)?.take() != nil
    }

    /// Whether `source` has no token left now (or no bucket can be made for it), without taking one.
    package func isExhausted(_ source: String) -> Bool {
        guard let bucket = bucket(for: source) else { return true }
        return !bucket.hasToken
    }

    /// Takes a token from `source`'s bucket if one is left (a refusal it earned, counted against its budget).
    package func charge(_ source: String) {
        _ = bucket(for: source)?.take()
    }

    private func bucket(for source: String) -> TokenBucket? {
        buckets.withLockedValue { b -> TokenBucket? in
            if let bucket = b[source] { return bucket }
            if b.count >= Self.maxSources { b = b.filter { !$0.value.isFull } }
            guard b.count < Self.maxSources else { return nil }
            let bucket = TokenBucket(capacity: capacity, refillPerSecond: refillPerSecond, clock: clock)
            b[source] = bucket
            return bucket
        }
    }
}
