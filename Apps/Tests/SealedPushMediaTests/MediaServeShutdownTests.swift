import Foundation
import SealedPushTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("sealedpush-server media serve stops on SIGTERM", .serialized, .timeLimit(.minutes(2)))
struct MediaServeShutdownTests {
    @Test func sigtermExitsZero() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("media-term-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("media"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try ServerChild(ProjectPaths.sealedpushServerBinary, ["media", "serve", "media", "--listen", "127.0.0.1:0"],
                                     in: directory, stderr: directory.appendingPathComponent("serve.log"))
        let first = try #require(server.firstLine(), "media serve printed nothing")
        #expect(first.hasPrefix("listening on http://127.0.0.1:"))
        kill(server.process.processIdentifier, SIGTERM)
        // Polls for the exit with a deadline; killed if it is still running then.
        let deadline = ContinuousClock.now + .seconds(15)
        while server.process.isRunning, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.02) }
        let stillRunning = server.process.isRunning
        if stillRunning { server.stop() }
        let log = (try? String(contentsOf: directory.appendingPathComponent("serve.log"), encoding: .utf8)) ?? ""
        #expect(!stillRunning, "media serve still ran 15 s after SIGTERM; stderr: \(log)")
        #expect(server.process.terminationReason == .exit && server.process.terminationStatus == 0,
                "media serve must exit 0 on SIGTERM; stderr: \(log)")
    }
}
