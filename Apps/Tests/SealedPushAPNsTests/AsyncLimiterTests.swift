@testable import SealedPushAPNs
import Testing

/// The provider client's in-flight bound: a waiter cancelled while it waits leaves the queue without a slot.
///
/// The limit catches a hang, not slowness: on a two-core machine under ThreadSanitizer, the CLI suites'
/// synchronous child-process waits can hold both cooperative threads for over a minute (CI saw all three
/// tests here pass after 81–108 s), so it is as long as the other suites'.
@Suite("APNs client: the in-flight limiter", .timeLimit(.minutes(10)))
struct AsyncLimiterTests {
    /// Polls `condition` every millisecond until it holds or 5 minutes passed (see the suite's time limit).
    static func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(300)
        while !condition() {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return true
    }

    @Test func aCancelledWaiterThrowsAndTakesNoSlot() async throws {
        let limiter = AsyncLimiter(limit: 1)
        try await limiter.acquire()
        let waiter = Task { try await limiter.acquire() }
        #expect(await Self.eventually { limiter.state.withLockedValue { !$0.waiters.isEmpty } }, "the second acquire never queued")
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(limiter.state.withLockedValue { $0.waiters.isEmpty })
        #expect(limiter.held == 1)
        limiter.release()
        #expect(limiter.held == 0)
        // The slot the cancelled waiter never took is free for the next one.
        try await limiter.acquire()
        #expect(limiter.held == 1)
        limiter.release()
    }

    @Test func anAlreadyCancelledTaskDoesNotWait() async {
        let limiter = AsyncLimiter(limit: 1)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await limiter.acquire()
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(limiter.held == 0)
    }

    @Test func waitersAreServedInOrder() async throws {
        let limiter = AsyncLimiter(limit: 1)
        try await limiter.acquire()
        let order = Order()
        var tasks: [Task<Void, any Error>] = []
        for n in 0..<5 {
            tasks.append(Task {
                try await limiter.acquire()
                order.append(n)
                limiter.release()
            })
            // Each waiter queues before the next starts, so the queue order is 0…4.
            #expect(await Self.eventually { limiter.state.withLockedValue { $0.waiters.count == n + 1 } })
        }
        limiter.release()
        for task in tasks { try await task.value }
        #expect(order.values == [0, 1, 2, 3, 4])
        #expect(limiter.held == 0)
    }
}

import NIOConcurrencyHelpers

/// The order waiters got their slot in.
final class Order: Sendable {
    private let state = NIOLockedValueBox<[Int]>([])
    func append(_ n: Int) { state.withLockedValue { $0.append(n) } }
    var values: [Int] { state.withLockedValue { $0 } }
}
