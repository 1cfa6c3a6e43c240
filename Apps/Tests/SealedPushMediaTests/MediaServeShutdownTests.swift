import Foundation
import SealedPushTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("sealedpush-server media serve stops on SIGTERM", .serialized, .timeLimit(.minutes(10)))
struct MediaServeShutdownTests {
    @Test func sigtermExitsZero() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("media-term-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("media"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary, ["media", "serve", "media", "--listen", "127.0.0.1:0"],
                                      in: directory, readLines: true)
        let first = try #require(server.nextLine(within: .seconds(60)), "media serve printed nothing: \(server.stderrText)")
        #expect(first.hasPrefix("listening on http://127.0.0.1:"))
        // SIGTERM, then up to 15 s before SIGKILL: a clean exit 0, not a kill.
        let result = server.terminate(grace: .seconds(60))
        #expect(result.exitedNormally && result.status == 0, "media serve must exit 0 on SIGTERM within 60 s; stderr: \(result.stderr)")
    }
}
