import SealedPushCLI
package import ArgumentParser

/// The `sealedpush-server` command: the push gateway, the development servers (a local APNs, a local FCM, a local
/// Web Push service, a media server, the receipt collector) and the demo that plays the whole story with them.
package struct SealedPushServerCommand: AsyncParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "sealedpush-server",
        abstract: "SealedPush's servers: the push gateway, a local APNs, a local FCM, a local Web Push service, a media server, the receipt collector, and the demo.",
        discussion: """
            `gateway` is the push gateway a backend calls over HTTP (docs/gateway.md); `gateway backup` copies \
            its live SQLite database. Each server runs until SIGTERM or SIGINT, then shuts down gracefully (the \
            gateway drains the pushes in flight; the local APNs sends GOAWAY and lets requests in flight finish) \
            and exits 0. The light CLI, `sealedpush`, seals, sends and plays the device.
            """,
        version: "0.1.0",
        subcommands: [APNsCommand.self, FCMCommand.self, WebPushCommand.self, MediaCommand.self, ReceiptsCommand.self, GatewayCommand.self, DemoCommand.self]
    )

    package init() {}
}
