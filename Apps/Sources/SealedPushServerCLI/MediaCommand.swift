import SealedPushCLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Hummingbird
import Logging
import SealedPushMediaServer

/// `sealedpush-server media`: development tools for encrypted media attachments.
struct MediaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "media",
        abstract: "Development tools for encrypted media attachments.",
        subcommands: [Serve.self]
    )

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve a directory of encrypted media objects over HTTP (for development and tests).",
            discussion: """
                Serves each file of DIR (as written by `sealedpush seal --attach … --media-dir DIR`) at \
                /NAME with Content-Length; only the last path component names a file, so --media-url may \
                carry a path prefix. Names starting with '.', or holding anything but letters, digits, \
                '-', '_' and '.', are 404: nothing outside DIR is ever served. Requests are logged to \
                standard error (method, path, status, length), never an object's bytes. Prints \
                `listening on http://HOST:PORT` once bound (port 0 picks a free port). Runs until \
                SIGTERM or SIGINT, then stops accepting, lets requests in flight finish and exits 0.

                Example: sealedpush-server media serve ./media --listen 127.0.0.1:8080
                """)

        @Argument(help: ArgumentHelp("The directory of media objects.", valueName: "DIR"))
        var directory: String

        @Option(name: .long, help: ArgumentHelp("The address to listen on.", valueName: "HOST:PORT"))
        var listen = HostPort(host: "127.0.0.1", port: 8080)

        @OptionGroup var logging: LoggingOptions


        func run() async throws {
            var isDirectory = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory else {
                throw CLIError("the media directory \(directory) does not exist or is not a directory")
            }
            let (host, port) = (listen.host, listen.port)
            logging.apply(default: .info)  // one line per request (path, status)
            let logger = Logger(label: "sealedpush.media")
            let server = MediaServer(directory: directory, host: host, port: port, logger: logger)
            let app = server.application { address in
                // Unbuffered, so a parent reading the pipe sees the line at once.
                StandardIO.writeOutput(Array("listening on http://\(address)\n".utf8))
            }
            let groupLogger = Logger(label: "sealedpush.media.services")
            do { try await runUntilSignalled([app], logger: groupLogger) } catch {
                throw CLIError("the media server stopped: \(error); check that \(listen) is free and allowed")
            }
        }
    }
}
