import ArgumentParser

/// `sealedpush seal` (being built).
struct SealCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "seal", abstract: "Not built yet.")

    func run() async throws { throw CLIError("sealedpush seal is not built yet") }
}
