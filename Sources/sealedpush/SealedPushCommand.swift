import ArgumentParser

/// The `sealedpush` command: end-to-end encrypted push notifications, sender and device side.

struct SealedPushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sealedpush",
        abstract: "End-to-end encrypted push notifications: seal on the server, open in the notification service extension.",
        discussion: """
            Secret stores (device keys, sender keys, trust, lock state) live under a keychain directory:
            --keychain DIR, else $SEALEDPUSH_KEYCHAIN, else ./keys.
            """,
        version: "0.1.0",
        subcommands: [
            SealCommand.self, KeysCommand.self, SenderCommand.self, TrustCommand.self, DeviceCommand.self,
            DemoCommand.self, BenchCommand.self,
        ]
    )
}
