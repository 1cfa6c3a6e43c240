import ArgumentParser

/// `sealedpush bench` (being built).
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "bench", abstract: "Not built yet.")

    func run() async throws { throw CLIError("sealedpush bench is not built yet") }
}
