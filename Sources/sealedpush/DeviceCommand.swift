import ArgumentParser

/// `sealedpush device` (being built).
struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "device", abstract: "Not built yet.")

    func run() async throws { throw CLIError("sealedpush device is not built yet") }
}
