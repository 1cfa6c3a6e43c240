import NIOConcurrencyHelpers

/// A result set once that any number of tasks wait for: the store's "migrated" and "stop the client" signals,
/// the gateway's "ready to serve". A waiter that is cancelled stops waiting (`CancellationError`); the result,
/// once set, never changes.
final class OneShot<Value: Sendable>: Sendable {
    private struct State {
        var result: Result<Value, any Error>?
        var waiters: [UInt64: CheckedContinuation<Value, any Error>] = [:]
        var nextID: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    init() {}

    /// Sets the result and resumes every waiter; false (and nothing changes) when it was already set.
    @discardableResult
    func fulfil(_ result: Result<Value, any Error>) -> Bool {
        let waiters = state.withLockedValue { s -> [CheckedContinuation<Value, any Error>]? in
            guard s.result == nil else { return nil }
            s.result = result
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        guard let waiters else { return false }
        for waiter in waiters { waiter.resume(with: result) }
        return true
    }

    /// The result, if it is set.
    var result: Result<Value, any Error>? { state.withLockedValue { $0.result } }

    /// Whether it is set with a value (not an error).
    var succeeded: Bool {
        if case .success = result { return true }
        return false
    }

    /// Waits for the result: its value, or its error thrown; `CancellationError` when the waiting task is cancelled first.
    func wait() async throws -> Value {
        let id = state.withLockedValue { s in
            defer { s.nextID += 1 }
            return s.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let now = state.withLockedValue { s -> Result<Value, any Error>? in
                    if let result = s.result { return result }
                    // The cancellation flag is set before `onCancel` runs: a cancellation that came before this
                    // registration is seen here, one that comes after finds the waiter to resume.
                    if Task.isCancelled { return .failure(CancellationError()) }
                    s.waiters[id] = continuation
                    return nil
                }
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            let waiter = state.withLockedValue { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
