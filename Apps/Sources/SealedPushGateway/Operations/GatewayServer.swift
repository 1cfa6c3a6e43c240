import Hummingbird
import HummingbirdCore
import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif
public import Logging
public import ServiceLifecycle
import UnixSignals

/// The running gateway's services, in the order a `ServiceGroup` starts them (it shuts them down in
/// reverse): the store's own (PostgreSQL: its client, then its heartbeat, which migrates first), the gateway's
/// resources (which wait for the store to be ready), the HTTP servers, the drain's linger, then the delivery and
/// webhook workers — so on SIGTERM the workers drain first while the API still answers (`503` for new messages),
/// the listeners keep answering (receipts, reports) for `http.drain_linger` more, the servers close after that, the resources close the store, and the store's client stops last. The servers and workers start
/// once the store is ready (`Gateway.prepare()`): no request is answered before the migrations are done.
public enum GatewayServer {
    /// The services of `gateway`: the store's services (`GatewayStore.services`), its resources, the API on
    /// `listen`, the admin routes on `admin_listen`, the device endpoints on `device_listen` when configured, and
    /// the workers. `onListening` gets each server's name and bound port as it starts.
    public static func services(_ gateway: Gateway, logger: Logger,
                                onListening: @escaping @Sendable (String, Int) async -> Void = { _, _ in }) -> [any Service] {
        let configuration = gateway.configuration
        var httpLogger = logger
        httpLogger.logLevel = max(logger.logLevel, .notice)  // Hummingbird's own per-connection lines stay quiet
        func server(_ name: String, _ router: Router<GatewayRequestContext>, _ address: GatewayConfiguration.HostAndPort, _ serverName: String,
                    perSource: Bool = true) -> any Service {
            // The API and device listeners cap each source's connections (the admin listener is the operator's).
            if perSource { gateway.metrics.declareConnectionRefusals(listener: name) }
            let sources = perSource ? SourceConnections(limit: configuration.http.maxConnectionsPerSource, exempt: configuration.trustedProxies,
                                                        onRefused: { gateway.metrics.connectionRefused(listener: name) }) : nil
            return Application(
                router: router,
                server: .http1(configuration: HTTP1Channel.Configuration(
                    additionalChannelHandlers: (sources.map { [SourceConnectionLimitHandler(connections: $0)] } ?? [])
                        + [RequestDeadlineHandler(limits: configuration.http)])),
                configuration: ApplicationConfiguration(
                    address: .hostname(address.host, port: address.port), serverName: serverName,
                    availableConnectionsDelegate: MaximumAvailableConnections(configuration.http.maxConnections)),
                onServerRunning: { channel in await onListening(name, channel.localAddress?.port ?? address.port) },
                logger: httpLogger)
        }
        // First: the store's client and heartbeat stop last, after the resources closed the store through them.
        var services: [any Service] = gateway.store.services
        services.append(GatewayResources(gateway: gateway))  // then: it stops after the servers, closing the clients and the store
        var gated: [any Service] = [
            server("api", GatewayHTTP.apiRouter(gateway, logger: logger), configuration.listen, "sealedpush-gateway"),
            server("admin", GatewayHTTP.adminRouter(gateway, logger: logger), configuration.adminListen, "sealedpush-gateway-admin", perSource: false),
        ]
        if let device = configuration.deviceListen {
            gated.append(server("device", GatewayHTTP.deviceRouter(gateway, logger: logger), device, "sealedpush-gateway-device"))
        }
        // Between the servers and the workers: on SIGTERM it returns `http.drain_linger` after the drain ended, so
        // the servers (receipts, reports) stop only then.
        gated.append(DrainLinger(gateway: gateway, linger: configuration.http.drainLinger))
        gated.append(DeliveryWorker(gateway: gateway))
        gated.append(WebhookWorker(gateway: gateway))  // last: it stops first, handing back its events
        services += gated.map { StartsWhenReady($0, gateway: gateway) }
        return services
    }

    /// Checks that every listen address of `configuration` can be bound now, before the store opens and any
    /// server starts (each is bound and released at once), so a busy or foreign address stops the start with an
    /// error naming its member and address instead of after another server printed that it listens.
    public static func checkListenAddresses(_ configuration: GatewayConfiguration) async throws(GatewayConfigurationError) {
        var addresses: [(String, GatewayConfiguration.HostAndPort)] = [("/listen", configuration.listen), ("/admin_listen", configuration.adminListen)]
        if let device = configuration.deviceListen { addresses.append(("/device_listen", device)) }
        for (member, address) in addresses where address.port != 0 {
            do {
                let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .bind(host: address.host, port: address.port).get()
                try await channel.close()
            } catch let error as IOError {
                let why = switch error.errnoCode {
                case EADDRINUSE: "is already in use by another process; stop it or choose another port"
                case EACCES: "needs privileges this process lacks (ports below 1024); choose a port of 1024 or more"
                case EADDRNOTAVAIL: "is not an address of this machine; use one of its addresses, 127.0.0.1 or 0.0.0.0"
                default: "cannot be listened on (errno \(error.errnoCode)); choose another address"
                }
                throw GatewayConfigurationError(member, "\(address) \(why)")
            } catch {
                throw GatewayConfigurationError(member, "\(address) cannot be listened on (\(type(of: error))); check the host name, or use an IP address")
            }
        }
    }
}

/// The gateway's own resources as a service: the first of the group after the store's own, so the last of the
/// gateway's to stop. It first waits for the store to be ready (`Gateway.prepare()`: the migrations applied, the
/// idempotency secret read), which the servers and workers wait for. While the gateway runs it shuts down the APNs
/// clients that reloads replaced, once their attempts in flight have finished; when every later service has
/// stopped, it shuts down every app's clients and closes the store (`Gateway.close()`).
public struct GatewayResources: Service {
    let gateway: Gateway

    /// The resources of `gateway`.
    public init(gateway: Gateway) { self.gateway = gateway }

    /// Prepares the gateway, retires replaced clients each second until graceful shutdown, then closes everything.
    /// A store that cannot be made ready ends it with that error (and closes the gateway); a graceful shutdown that
    /// comes before the store is ready closes the gateway and ends it without one.
    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown { [gateway] in try await gateway.prepare() }
        } catch {
            await gateway.close()
            if Task.isShuttingDownGracefully && !Task.isCancelled { return }  // stopped while starting: nothing failed
            throw error
        }
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            _ = try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(1)) }
            await gateway.shutDownRetired()
        }
        await gateway.close()
    }
}

/// Reloads the apps and their keys from the configuration file on each `SIGHUP` (gateway v1 §1); a file that
/// does not load is logged and the running configuration stays.
public struct ReloadOnHangup: Service {
    let gateway: Gateway
    let path: String
    let logger: Logger

    /// Reloads `gateway` from `path`.
    public init(gateway: Gateway, path: String, logger: Logger) {
        self.gateway = gateway
        self.path = path
        self.logger = logger
    }

    /// Waits for `SIGHUP` until graceful shutdown.
    public func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            do {
                try await gateway.reload(try GatewayConfiguration.load(path: path))
            } catch {
                logger.error("configuration not reloaded; the running one stays: \(error)")
            }
        }
    }
}

/// A service that starts once the gateway is ready (`Gateway.prepare()` finished): the HTTP servers and the workers,
/// so that nothing is answered or claimed before the store's migrations are done. A graceful shutdown that comes
/// first ends it without starting the service; a failed preparation ends it with that error.
struct StartsWhenReady: Service {
    let service: any Service
    let gateway: Gateway

    init(_ service: any Service, gateway: Gateway) {
        self.service = service
        self.gateway = gateway
    }

    func run() async throws {
        let ready: Bool
        do {
            ready = try await cancelWhenGracefulShutdown { [gateway] in
                try await gateway.waitUntilPrepared()
                return true
            }
        } catch is CancellationError where Task.isShuttingDownGracefully && !Task.isCancelled {
            ready = false
        }
        guard ready else { return }
        try await service.run()
    }
}

/// Holds the servers open for `linger` after the workers drained on SIGTERM: a device whose push was accepted just
/// before the stop sends its receipt to a port that still answers (#44 pilot 5). `/readyz` says `draining`
/// meanwhile, so a load balancer sends new traffic elsewhere; new messages are `503`.
struct DrainLinger: Service {
    let gateway: Gateway
    let linger: Duration

    func run() async throws {
        try? await gracefulShutdown()
        guard linger > .zero, !Task.isCancelled else { return }
        gateway.logger.notice("the listeners keep answering receipts and reports for the drain's linger, then close",
                              metadata: ["linger_ms": "\(linger.milliseconds)"])
        try? await Task.sleep(for: linger)
    }
}
