import Logging
import ServiceLifecycle

/// Runs `services` in one `ServiceGroup` until SIGTERM or SIGINT, which shut them down gracefully in reverse
/// order (so list a database before the server that uses it); returns once every service has returned.
func runUntilSignalled(_ services: [any Service], logger: Logger) async throws {
    let group = ServiceGroup(configuration: ServiceGroupConfiguration(
        services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    try await group.run()
}

/// A `ServiceGroup` running in the background (the demo's servers): `stop()` shuts it down gracefully
/// and waits for every service to return.
final class BackgroundServices: Sendable {
    let group: ServiceGroup
    let running: Task<Void, any Error>

    /// Starts `services` in a group of their own; no signal handling (the caller stops them).
    init(_ services: [any Service], logger: Logger) {
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: services, logger: logger))
        self.group = group
        running = Task { try await group.run() }
    }

    /// Triggers graceful shutdown and waits until the group has returned.
    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await running.value
    }

    /// Runs `body` with `services` running in the background, then stops them, whether `body` returned or threw.
    static func with<R>(_ services: [any Service], logger: Logger, _ body: () async throws -> R) async throws -> R {
        let background = BackgroundServices(services, logger: logger)
        let result: Result<R, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        await background.stop()
        return try result.get()
    }
}

/// A service that runs `body` once the group is running (the group traps signals by then), then `service`:
/// `apns serve` prints its `listening on` line from here, so a SIGTERM sent on reading it is always handled.
struct AfterStart<Wrapped: Service>: Service {
    let service: Wrapped
    let body: @Sendable () async throws -> Void

    func run() async throws {
        try await body()
        try await service.run()
    }
}
