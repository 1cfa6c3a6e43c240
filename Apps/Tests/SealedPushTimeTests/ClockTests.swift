import Testing
import SealedPushTime
@testable import SealedPushRateLimit

/// The injected clock, and the rate limits read on it: nothing here depends on how fast the machine is.
@Suite struct ClockTests {
    @Test func manualClockMovesBothReadingsTogether() {
        let manual = SealedPushManualClock(wall: UnixMilliseconds(1_764_300_000_000))
        let clock = manual.clock
        let instant = clock.monotonic()
        manual.advance(by: .milliseconds(1500))
        #expect(clock.wall() == UnixMilliseconds(1_764_300_001_500))
        #expect(instant.duration(to: clock.monotonic()) == .milliseconds(1500))
        manual.setWall(UnixMilliseconds(1_000))  // a stepped wall clock leaves the monotonic reading alone
        #expect(clock.wall().milliseconds == 1_000)
        #expect(instant.duration(to: clock.monotonic()) == .milliseconds(1500))
    }

    @Test func unixMillisecondsCarryTheirUnit() {
        #expect(UnixMilliseconds(1999).seconds == 1)
        #expect(UnixMilliseconds(-1).seconds == -1)
        #expect(UnixMilliseconds(1000) + .seconds(2) == UnixMilliseconds(3000))
        #expect(UnixMilliseconds(1) < UnixMilliseconds(2))
        #expect("\(UnixMilliseconds(42))" == "42 ms")
        let wall = SealedPushClock.system.wall().milliseconds
        #expect(wall > 1_700_000_000_000)  // the system clock reads Unix milliseconds, not seconds
    }

    @Test func tokenBucketRefillsOnlyWhenTheInjectedClockAdvances() {
        let manual = SealedPushManualClock()
        let bucket = TokenBucket(capacity: 2, refillPerSecond: 1, clock: manual.clock)
        #expect(bucket.take() == 1)
        #expect(bucket.take() == 0)
        #expect(bucket.take() == nil)  // empty; the clock stands still, so it stays empty
        #expect(bucket.take() == nil)
        manual.advance(by: .milliseconds(999))
        #expect(!bucket.hasToken)  // not yet a whole token
        manual.advance(by: .milliseconds(1))
        #expect(bucket.hasToken)
        #expect(bucket.take() == 0)
        #expect(bucket.take() == nil)
        manual.advance(by: .seconds(60))
        #expect(bucket.isFull)
        #expect(bucket.available == 2)  // refilled to its capacity, not past it
    }

    @Test func sourceLimiterRefillsEachSourceOnTheInjectedClock() {
        let manual = SealedPushManualClock()
        let limiter = SourceRateLimiter(capacity: 1, refillPerSecond: 0.5, clock: manual.clock)
        #expect(limiter.admit("a"))
        #expect(!limiter.admit("a"))
        #expect(limiter.admit("b"))  // each source has its own bucket
        #expect(limiter.isExhausted("a"))
        manual.advance(by: .seconds(1))
        #expect(limiter.isExhausted("a"))  // half a token
        manual.advance(by: .seconds(1))
        #expect(!limiter.isExhausted("a"))
        #expect(limiter.admit("a"))
    }
}
