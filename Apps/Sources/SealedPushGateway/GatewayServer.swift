import Hummingbird
public import Logging
public import ServiceLifecycle
import UnixSignals

/// The running gateway's services, in the order a `ServiceGroup` starts them (it shuts them down in
/// reverse): the HTTP servers, then the delivery worker — so on SIGTERM the worker drains first while the
/// API still answers (`503` for new messages), and the servers close after it.
public enum GatewayServer {
    /// The services of `gateway`: the API on `listen`, the admin routes on `admin_listen`, the device
    /// endpoints on `device_listen` when configured, and the delivery worker. `onListening` gets each
    /// server's name and bound port as it starts.
    public static func services(_ gateway: Gateway, logger: Logger,
                                onListening: @escaping @Sendable (String, Int) async -> Void = { _, _ in }) -> [any Service] {
        let configuration = gateway.configuration
        var httpLogger = logger
        httpLogger.logLevel = max(logger.logLevel, .notice)  // Hummingbird's own per-connection lines stay quiet
        var services: [any Service] = []
        services.append(Application(
            router: GatewayHTTP.apiRouter(gateway, logger: logger),
            configuration: ApplicationConfiguration(address: .hostname(configuration.listen.host, port: configuration.listen.port),
                                                    serverName: "sealedpush-gateway"),
            onServerRunning: { channel in await onListening("api", channel.localAddress?.port ?? configuration.listen.port) },
            logger: httpLogger))
        services.append(Application(
            router: GatewayHTTP.adminRouter(gateway, logger: logger),
            configuration: ApplicationConfiguration(address: .hostname(configuration.adminListen.host, port: configuration.adminListen.port),
                                                    serverName: "sealedpush-gateway-admin"),
            onServerRunning: { channel in await onListening("admin", channel.localAddress?.port ?? configuration.adminListen.port) },
            logger: httpLogger))
        if let device = configuration.deviceListen {
            services.append(Application(
                router: GatewayHTTP.deviceRouter(gateway, logger: logger),
                configuration: ApplicationConfiguration(address: .hostname(device.host, port: device.port), serverName: "sealedpush-gateway-device"),
                onServerRunning: { channel in await onListening("device", channel.localAddress?.port ?? device.port) },
                logger: httpLogger))
        }
        services.append(DeliveryWorker(gateway: gateway))
        services.append(WebhookWorker(gateway: gateway))  // last: it stops first, handing back its events
        return services
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
