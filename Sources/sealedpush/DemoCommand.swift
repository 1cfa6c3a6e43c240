import ArgumentParser

/// `sealedpush demo` (being built).
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "demo", abstract: "Not built yet.")

    func run() async throws { throw CLIError("sealedpush demo is not built yet") }
}
