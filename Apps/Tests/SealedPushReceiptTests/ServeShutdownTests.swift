import Foundation
import SealedPushTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("sealedpush-server receipts serve stops on SIGTERM", .serialized, .timeLimit(.minutes(10)))
struct ReceiptsServeShutdownTests {
    @Test func sigtermExitsZeroAndClosesTheDatabase() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("receipts-term-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary,
                                      ["receipts", "serve", "--db", "receipts.sqlite", "--listen", "127.0.0.1:0"], in: directory,
                                      readLines: true)
        let first = try #require(server.nextLine(within: .seconds(60)), "receipts serve printed nothing: \(server.stderrText)")
        #expect(first.hasPrefix("listening on 127.0.0.1:"))
        let result = server.terminate(grace: .seconds(60))
        #expect(result.exitedNormally && result.status == 0, "receipts serve must exit 0 on SIGTERM within 60 s; stderr: \(result.stderr)")
        // SQLite removes the WAL file when its last connection closes: the database was closed, not abandoned.
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("receipts.sqlite-wal").path))
        let stats = try ChildProcess.sealedpushServer(["receipts", "stats", "--db", "receipts.sqlite"], in: directory, timeout: 60)
        #expect(stats.status == 0, "\(stats.stderr)")
        #expect(stats.stdoutText.hasPrefix("0 sent, 0 delivered, 0 pending"))
    }

    /// A server that cannot bind fails the group: the database service is cancelled and still closes the database.
    @Test func aBusyPortExitsOneNamingItAndClosesTheDatabase() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("receipts-busy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary,
                                     ["receipts", "serve", "--db", "first.sqlite", "--listen", "127.0.0.1:0"], in: directory, readLines: true)
        defer { first.kill() }
        let line = try #require(first.nextLine(within: .seconds(60)), "receipts serve printed nothing: \(first.stderrText)")
        let address = try #require(line.split(separator: " ").last.map(String.init))
        let second = try ChildProcess.sealedpushServer(["receipts", "serve", "--db", "second.sqlite", "--listen", address], in: directory,
                                                       timeout: 60)
        #expect(second.status == 1, "\(second.stderr)")
        #expect(second.stderr.contains("check that \(address) is free"), "\(second.stderr)")
        #expect(!second.stderr.contains("Assertion failed"), "\(second.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("second.sqlite-wal").path))
    }
}
