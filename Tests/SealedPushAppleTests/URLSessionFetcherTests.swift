// URLSessionAttachmentFetcher (SealedPushApple) against the stand-in URLSession, which serves programmed
// routes by writing each body to a temporary file in chunks and calling the delegate as URLSession does.
#if os(Linux)
import Testing
import Foundation
import FoundationNetworking
import SealedPushApple
import SealedPushReceiver
import SealedPushWire
import SealedPushCrypto
import SealedPushTestSupport

/// Reads a whole body, recording the size of each piece.
private func drain(_ body: any AttachmentByteStream) async throws -> (bytes: [UInt8], pieces: [Int]) {
    var bytes: [UInt8] = []
    var pieces: [Int] = []
    while let piece = try await body.next() {
        bytes += piece
        pieces.append(piece.count)
    }
    return (bytes, pieces)
}

@Suite("URLSessionAttachmentFetcher against the stand-in URLSession", .serialized) struct URLSessionFetcherTests {
    init() { TestLogging.quiet() }

    @Test("a body written in chunks is read back in 64 KiB pieces from a file already unlinked")
    func chunked() async throws {
        let body = CryptoLibrary.randomBytes(count: 200_000)
        StandInURLServer.serve(["https://cdn.example/o": .body(body, chunk: 10_000)])
        let fetcher = URLSessionAttachmentFetcher()
        let response = try await fetcher.get("https://cdn.example/o", maximumBytes: 300_000)
        #expect(response.status == 200 && response.announcedLength == 200_000 && response.location == nil)
        // The download file is gone (opened and unlinked) before the first byte is read.
        let file = try #require(StandInURLServer.record(for: "https://cdn.example/o")?.file)
        #expect(!FileManager.default.fileExists(atPath: file))
        let (bytes, pieces) = try await drain(response.body)
        #expect(bytes == body)
        #expect(pieces.allSatisfy { $0 <= URLSessionAttachmentFetcher.pieceSize } && pieces.count == 4)
    }

    @Test("a redirect is handed back (status and Location), never followed")
    func redirect() async throws {
        StandInURLServer.serve(["https://cdn.example/o": .redirect(status: 302, location: "https://other.example/p")])
        let response = try await URLSessionAttachmentFetcher().get("https://cdn.example/o", maximumBytes: 1000)
        #expect(response.status == 302 && response.location == "https://other.example/p")
        await response.body.cancel()
        #expect(StandInURLServer.records.map(\.url) == ["https://cdn.example/o"])
        #expect(StandInURLServer.records.first?.followedRedirect == false)
    }

    @Test("past maximumBytes the download task is cancelled and the body throws AttachmentBodyTooLarge")
    func bounded() async throws {
        StandInURLServer.serve(["https://cdn.example/big": .body(CryptoLibrary.randomBytes(count: 1_000_000), chunk: 16_384, announce: false)])
        let response = try await URLSessionAttachmentFetcher().get("https://cdn.example/big", maximumBytes: 50_000)
        await #expect(throws: AttachmentBodyTooLarge(limit: 50_000)) { _ = try await drain(response.body) }
        let record = try #require(StandInURLServer.record(for: "https://cdn.example/big"))
        #expect(record.cancelled && record.bytesWritten < 100_000)
    }

    @Test("cancelling the Swift task cancels the download task")
    func cancellation() async throws {
        let url = "https://cdn.example/slow"
        StandInURLServer.serve([url: .body(CryptoLibrary.randomBytes(count: 1_000_000), chunk: 1000, delay: .milliseconds(100))])
        let fetcher = URLSessionAttachmentFetcher()
        let task = Task { try await fetcher.get(url, maximumBytes: 2_000_000) }
        // Waits by the clock (a loaded machine can be slow to start the task and the stand-in's thread).
        let clock = ContinuousClock()
        let start = clock.now
        while (StandInURLServer.record(for: url)?.bytesWritten ?? 0) == 0, clock.now - start < .seconds(60) {
            try await Task.sleep(for: .milliseconds(5))
        }
        task.cancel()
        await #expect(throws: CancellationError.self) { _ = try await task.value }
        // get() returns only after the delegate's didCompleteWithError: the record is final.
        let record = try #require(StandInURLServer.record(for: url))
        #expect(record.cancelled, "the download task ran to its end: \(record)")
        #expect(record.bytesWritten < 1_000_000)
    }

    @Test("a connection failure throws; a URL URLSession cannot take is refused before any task")
    func failures() async throws {
        StandInURLServer.serve(["https://cdn.example/down": .failure])
        await #expect(throws: (any Error).self) { _ = try await URLSessionAttachmentFetcher().get("https://cdn.example/down", maximumBytes: 10) }
        await #expect(throws: URLSessionFetchError.invalidURL) { _ = try await URLSessionAttachmentFetcher().get("ftp://cdn.example/x", maximumBytes: 10) }
    }

    @Test("the attachment pipeline over the fetcher: an object opens; one over its bound is attachmentTooLarge")
    func pipeline() async throws {
        let directory = NSTemporaryDirectory() + "sealedpush-urlsession-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = [0xFF, 0xD8, 0xFF] + CryptoLibrary.randomBytes(count: 150_000)
        let key = SecretStream.generateKey()
        let encryptor = try MediaObjectEncryptor(key: key, size: file.count, type: "image/jpeg")
        var object: [UInt8] = []
        try encryptor.update(file) { object += $0 }
        try encryptor.finish { object += $0 }
        let descriptor = AttachmentDescriptor(id: "a1", url: "https://cdn.example/o", key: key, type: "image/jpeg", size: file.count)
        StandInURLServer.serve(["https://cdn.example/o": .body(object, chunk: 32_768)])
        let pipeline = try AttachmentPipeline(fetcher: URLSessionAttachmentFetcher(), directory: directory)
        let attached = try await pipeline.run(descriptor).get()
        #expect(try Data(contentsOf: URL(fileURLWithPath: attached.url)) == Data(file))
        StandInURLServer.serve(["https://cdn.example/o": .body(object + CryptoLibrary.randomBytes(count: 200_000), chunk: 32_768, announce: false)])
        guard case let .failure(failure) = await pipeline.run(descriptor) else { Issue.record("expected a failure"); return }
        #expect(failure.reason == .attachmentTooLarge)
    }
}
#endif
