/// A bounded wait that ran out: what was awaited and for how long.
public struct WaitTimedOut: Error, CustomStringConvertible {
    /// What the test was waiting for.
    public let what: String
    /// How long it waited.
    public let waited: Duration

    /// Makes the error.
    public init(_ what: String, waited: Duration) {
        self.what = what
        self.waited = waited
    }

    /// A readable explanation.
    public var description: String { "timed out after \(waited) waiting for \(what)" }
}

/// A server task ended before it reported its address.
public struct ServerEndedBeforeBinding: Error, CustomStringConvertible {
    /// What the server task ended with (`nil`: it returned normally).
    public let error: (any Error)?
    /// A readable explanation.
    public var description: String {
        "the server ended before it reported its port" + (error.map { ": \(String(describing: $0))" } ?? "")
    }
}

/// The first element of `stream`, or `nil` if the stream finishes first; throws `WaitTimedOut` (naming `what`)
/// after `timeout`.
public func firstElement<Element: Sendable>(of stream: AsyncStream<Element>, within timeout: Duration,
                                            _ what: String) async throws -> Element? {
    try await withThrowingTaskGroup(of: Element?.self) { group in
        group.addTask {
            for await element in stream { return element }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw WaitTimedOut(what, waited: timeout)
        }
        defer { group.cancelAll() }
        // The first child to finish decides; cancelling the other ends it (the stream's iterator and the
        // sleep both return on cancellation).
        return try await group.next()!
    }
}

/// The port a server started in `server` reports on `ports`, waited for at most `timeout`.
///
/// `ports` must finish when the server task ends (`defer { continuation.finish() }` in the task), so a
/// bind failure ends the wait at once with `ServerEndedBeforeBinding` carrying the server's error; on
/// timeout the server task is cancelled and `WaitTimedOut` thrown.
public func boundPort(_ ports: AsyncStream<Int>, of server: Task<Void, any Error>,
                      within timeout: Duration = .seconds(60)) async throws -> Int {
    let port: Int?
    do {
        port = try await firstElement(of: ports, within: timeout, "the server's bound port")
    } catch {
        server.cancel()
        throw error
    }
    if let port { return port }
    do {
        try await server.value
        throw ServerEndedBeforeBinding(error: nil)
    } catch let ended as ServerEndedBeforeBinding {
        throw ended
    } catch {
        throw ServerEndedBeforeBinding(error: error)
    }
}

/// Polls `condition` (every few milliseconds) until it holds; throws `WaitTimedOut` (naming `what`) if it
/// still does not after `timeout`. For effects a test cannot await directly, instead of a fixed sleep.
public func waitUntil(_ what: String, within timeout: Duration = .seconds(30),
                      _ condition: () async throws -> Bool) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while try await !condition() {
        guard clock.now < deadline else { throw WaitTimedOut(what, waited: timeout) }
        try await Task.sleep(for: .milliseconds(2))
    }
}
