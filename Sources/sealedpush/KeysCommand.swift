import ArgumentParser

/// `sealedpush keys` (being built).
struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "keys", abstract: "Not built yet.")

    func run() async throws { throw CLIError("sealedpush keys is not built yet") }
}
