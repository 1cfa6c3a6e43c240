import ArgumentParser

/// `sealedpush trust` (being built).
struct TrustCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "trust", abstract: "Not built yet.")

    func run() async throws { throw CLIError("sealedpush trust is not built yet") }
}
