import ArgumentParser

/// `sealedpush sender` (being built).
struct SenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sender", abstract: "Not built yet.")

    func run() async throws { throw CLIError("sealedpush sender is not built yet") }
}
