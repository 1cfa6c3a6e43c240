import SealedPushCLI
import ArgumentParser
import Logging
import SealedPushCrypto
import SealedPushGateway
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `sealedpush-server gateway`: the push gateway (gateway v1, docs/gateway.md).
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Run the push gateway: a device registry, a durable queue and delivery through APNs, over HTTP.",
        subcommands: [Run.self, NewAPIKey.self, Backup.self, Probe.self],
        defaultSubcommand: Run.self)

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            abstract: "Run the gateway with a configuration file (the default subcommand).",
            discussion: """
                Serves the API of gateway v1 on `listen`, /healthz, /readyz and /metrics on `admin_listen`, and \
                delivers queued pushes through each app's APNs. Prints `api listening on HOST:PORT` and `admin \
                listening on HOST:PORT` once bound (port 0 picks a free one). SIGHUP reloads the apps and their \
                keys; SIGTERM or SIGINT stops taking messages (503), finishes the attempts in flight within 10 s, \
                and exits 0. docs/gateway.md describes the configuration.

                Example: sealedpush-server gateway --config gateway.json
                """)
        @Option(help: ArgumentHelp("The configuration file (JSON, gateway v1 §1).", valueName: "FILE"))
        var config: String
        @OptionGroup var logging: LoggingOptions

        func run() async throws {
            logging.apply(default: .info)
            let logger = Logger(label: "sealedpush.gateway")
            let configuration: GatewayConfiguration
            do { configuration = try GatewayConfiguration.load(path: config) } catch {
                throw CLIError("the configuration cannot be used: \(error)")
            }
            do { try await GatewayServer.checkListenAddresses(configuration) } catch {
                throw CLIError("the gateway cannot listen: \(error)")
            }
            let gateway: Gateway
            var options = GatewayOptions()
            options.lease = configuration.lease
            // Fault injection for the crash tests only: end the process between a batch's commit and its answer.
            if ProcessInfo.processInfo.environment["SEALEDPUSH_GATEWAY_FAULT"] == "exit-after-batch-commit" {
                logger.warning("SEALEDPUSH_GATEWAY_FAULT=exit-after-batch-commit: this process exits after the first batch it writes (a crash test); never set it in use")
                options.afterBatchCommit = { _exit(75) }  // no cleanup, as a crash
            }
            do { gateway = try await Gateway.open(configuration: configuration, options: options, logger: logger) } catch {
                throw CLIError("the gateway cannot start: \(error)")
            }
            let services = GatewayServer.services(gateway, logger: logger) { name, port in
                let host = switch name {
                case "api": configuration.listen.host
                case "admin": configuration.adminListen.host
                default: configuration.deviceListen?.host ?? ""
                }
                StandardIO.writeOutput(Array("\(name) listening on \(host.contains(":") ? "[\(host)]" : host):\(port)\n".utf8))
            }
            do {
                // The store's services come first (they stop last); the reload listener last (it stops first).
                try await runUntilSignalled(services + [ReloadOnHangup(gateway: gateway, path: config, logger: logger)], logger: logger)
            } catch let error as GatewayStoreError {
                // The store's setup (PostgreSQL: connecting, migrating) runs in the group, before any server listens.
                await gateway.close()
                throw CLIError("the gateway cannot start: \(error)")
            } catch {
                await gateway.close()
                throw CLIError("the gateway stopped: \(error); check that the listen addresses are free and allowed")
            }
            await gateway.close()
        }
    }

    struct NewAPIKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "new-api-key",
            abstract: "Make an API key: prints the key (give it to the backend) and its SHA-256 (put it in the configuration).",
            discussion: """
                The key is `sp_` and 40 random base62 characters (about 238 bits). The gateway keeps only the \
                SHA-256; store the key itself in the backend's secret store.

                Example: sealedpush-server gateway new-api-key
                """)
        @OptionGroup var output: JSONOutputOptions

        func run() async throws {
            let key = Self.makeKey()
            let digest = Hex.encode(SHA256Hasher.hash(Array(key.utf8)))
            if output.json {
                print(#"{"key":"\#(key)","sha256":"\#(digest)"}"#)
            } else {
                print("key: \(key)\nsha256: \(digest)")
            }
        }

        /// `sp_` and 40 base62 characters drawn without bias (bytes of 248 and above are drawn again).
        static func makeKey() -> String {
            let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
            var out = "sp_"
            while out.count < 43 {
                for byte in CryptoLibrary.randomBytes(count: 64) where byte < 248 && out.count < 43 { out.append(alphabet[Int(byte % 62)]) }
            }
            return out
        }
    }
}
