import CSodiumFloor
import Foundation
import Hummingbird
import Logging
import SealedPushCrypto
import SealedPushDeviceHTTP
import SealedPushMediaServer
import SealedPushReceiver
import SealedPushSender
import SealedPushWire
import Synchronization

/// `sealedpush-media-bench`: media throughput against raw libsodium secretstream loops, measured in the same run.
///
/// - encrypt: `MediaSealer.encrypt` (file → object file) vs a raw `crypto_secretstream_xchacha20poly1305_push`
///   loop over the same padded length in memory (reused buffers, no SealedPush code); target ≥ 0.8×.
/// - decrypt: `AttachmentPipeline` over `HTTPAttachmentFetcher` from `MediaServer` on loopback (download →
///   decrypt → file) vs a raw loop that pulls the same object from memory and writes the file to the same
///   directory (1 MiB writes, `fdatasync` once at the end: `RawStreamLoops.pullAndWrite`); target ≥ 0.8×.
///   For reference, without a target: the raw `_pull` loop alone (no file), and the pipeline from memory.
/// Each is the best of `--rounds` runs, the floor and the pipeline alternating. Prints one line per number,
/// stated met or NOT met.
@main
struct MediaBench {
    static func main() async throws {
        let arguments = CommandLine.arguments
        func option(_ name: String, _ fallback: Int) -> Int {
            guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]) else { return fallback }
            return v
        }
        let size = option("--size", 50_000_000)
        let rounds = option("--rounds", 3)
        // `--decrypt-only`: one encrypt to make the object, then only the loopback decrypt, `--rounds` times
        // (for `perf record`: no floors, no other pipelines in the profile).
        let decryptOnly = arguments.contains("--decrypt-only")
        let root = NSTemporaryDirectory() + "sealedpush-media-bench-\(UUID().uuidString)"
        let media = root + "/media", files = root + "/attachments"
        for d in [root, media, files] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]) }
        defer { try? FileManager.default.removeItem(atPath: root) }

        // A movie-sized file: the mp4 signature, then random bytes, written 1 MiB at a time.
        let filePath = root + "/movie.mp4"
        _ = FileManager.default.createFile(atPath: filePath, contents: nil)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: filePath))
        var written = 0
        while written < size {
            var piece = CryptoLibrary.randomBytes(count: min(1 << 20, size - written))
            if written == 0 { piece.replaceSubrange(0..<8, with: Array("\0\0\0\u{18}ftyp".utf8)) }
            try out.write(contentsOf: piece)
            written += piece.count
        }
        try out.close()

        let padded = MediaPadding.padme.paddedLength(size: size)
        var rawPush = Duration.seconds(1_000), encrypt = Duration.seconds(1_000)
        var rawPull = Duration.seconds(1_000), rawPullWrite = Duration.seconds(1_000), decrypt = Duration.seconds(1_000)
        var encryptStream = Duration.seconds(1_000), decryptMemory = Duration.seconds(1_000)
        let clock = ContinuousClock()
        // The sender's own work: a byte stream in (1 MiB pieces from memory), the object out to a caller's sink.
        let block = Array("\0\0\0\u{18}ftyp".utf8) + CryptoLibrary.randomBytes(count: (1 << 20) - 8)
        for _ in 0..<(decryptOnly ? 0 : rounds) {
            let produced = Mutex<Int>(0)
            let source = MediaAttachment.Source.stream(size: size, label: "movie.mp4") {
                produced.withLock { done -> [UInt8] in
                    let n = min(block.count, size - done)
                    done += n
                    return n == block.count ? block : Array(block.prefix(n))
                }
            }
            let start = clock.now
            _ = try MediaSealer.encrypt(MediaAttachment(source: source), id: "movie", to: DiscardingStore())
            encryptStream = min(encryptStream, clock.now - start)
        }
        let store = try DirectoryMediaStore(directory: media, baseURL: "http://127.0.0.1:1")
        var descriptor: AttachmentDescriptor?
        for _ in 0..<(decryptOnly ? 1 : rounds) {
            rawPush = min(rawPush, RawStreamLoops.push(paddedLength: padded))
            for name in try FileManager.default.contentsOfDirectory(atPath: media) { try FileManager.default.removeItem(atPath: media + "/" + name) }
            let start = clock.now
            descriptor = try MediaSealer.encrypt(MediaAttachment(file: filePath), id: "movie", to: store)
            encrypt = min(encrypt, clock.now - start)
        }
        guard var descriptor, let objectName = descriptor.url.split(separator: "/").last.map(String.init) else { return }
        let objectBytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: media + "/" + objectName)))

        // The media server on loopback, in this process.
        let (addresses, continuation) = AsyncStream<String>.makeStream()
        var logger = Logger(label: "media-bench")
        logger.logLevel = .error
        let app = MediaServer(directory: media, host: "127.0.0.1", port: 0, logger: logger).application { continuation.yield($0) }
        let serving = Task { try await app.run() }
        var address = ""
        for await a in addresses { address = a; break }
        descriptor.url = "http://\(address)/\(objectName)"
        let fetcher = HTTPAttachmentFetcher()
        let pipeline = try AttachmentPipeline(fetcher: fetcher, directory: files, policy: .development)
        let ad = MediaObjectFormat.additionalData(size: descriptor.size, type: descriptor.type)
        for _ in 0..<rounds {
            if !decryptOnly {
                rawPull = min(rawPull, RawStreamLoops.pull(object: objectBytes, key: descriptor.key, additionalData: ad))
                rawPullWrite = min(rawPullWrite, RawStreamLoops.pullAndWrite(object: objectBytes, key: descriptor.key, additionalData: ad,
                                                                             size: descriptor.size, path: files + "/floor.mp4"))
            }
            let start = clock.now
            let result = await pipeline.run(descriptor)
            decrypt = min(decrypt, clock.now - start)
            guard case let .success(attachment) = result else {
                print("media decrypt: the pipeline failed: \(result)")
                return
            }
            try FileManager.default.removeItem(atPath: attachment.url)
        }
        try await fetcher.shutdown()
        serving.cancel()
        if decryptOnly {
            let seconds = Double(decrypt.components.seconds) + Double(decrypt.components.attoseconds) / 1e18
            print(String(format: "media decrypt (loopback HTTP → decrypt → file), best of %d: %.0f MB/s", rounds, Double(padded) / seconds / 1e6))
            return
        }
        // The same without HTTP: the object from memory in 64 KiB pieces (where the loopback's share goes).
        let memory = try AttachmentPipeline(fetcher: MemoryObjectFetcher(object: objectBytes), directory: files, policy: .development)
        for _ in 0..<rounds {
            let start = clock.now
            let result = await memory.run(descriptor)
            decryptMemory = min(decryptMemory, clock.now - start)
            if case let .success(attachment) = result { try FileManager.default.removeItem(atPath: attachment.url) }
        }

        func mbps(_ bytes: Int, _ d: Duration) -> Double {
            let seconds = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
            return Double(bytes) / seconds / 1e6
        }
        func line(_ label: String, _ measured: Duration, _ floor: Duration, bytes: Int, target: Double) {
            let ratio = mbps(bytes, measured) / mbps(bytes, floor)
            let verdict = ratio >= target ? "met" : "NOT met"
            print(String(format: "%@: %.0f MB/s vs raw %.0f MB/s = %.2f× (target ≥ %.1f×): %@",
                         label, mbps(bytes, measured), mbps(bytes, floor), ratio, target, verdict))
        }
        print("media objects of a \(size)-byte movie (P = \(padded)), best of \(rounds):")
        line("media encrypt (byte stream → MediaSealer → caller's sink)", encryptStream, rawPush, bytes: padded, target: 0.8)
        line("media decrypt (loopback HTTP → decrypt → file, vs raw pull-and-write to a file)", decrypt, rawPullWrite, bytes: padded, target: 0.8)
        func info(_ label: String, _ measured: Duration, _ floor: Duration) {
            print(String(format: "  (for reference, no target) %@: %.0f MB/s = %.2f× raw", label, mbps(padded, measured),
                         mbps(padded, measured) / mbps(padded, floor)))
        }
        info("encrypt file → DirectoryMediaStore object file", encrypt, rawPush)
        info("decrypt in-memory fetcher → decrypt → file, vs raw pull-and-write", decryptMemory, rawPullWrite)
        info("decrypt loopback HTTP → decrypt → file, vs raw pull alone (no file)", decrypt, rawPull)
        info("raw pull-and-write to a file, vs raw pull alone", rawPullWrite, rawPull)
    }
}

/// A store whose objects go nowhere (a caller's sink that uploads, here counting only).
struct DiscardingStore: MediaObjectStore {
    final class Writer: MediaObjectWriter {
        let url = "https://cdn.example/o"
        var count = 0
        func write(_ bytes: [UInt8]) throws { count += bytes.count }
        func commit() throws {}
        func discard() {}
    }
    func createObject() throws -> any MediaObjectWriter { Writer() }
}

/// Hands out one object from memory in 64 KiB pieces.
struct MemoryObjectFetcher: AttachmentFetcher {
    let object: [UInt8]
    final class Body: AttachmentByteStream, @unchecked Sendable {
        // Read by one task, in order (the protocol's contract).
        let object: [UInt8]
        var offset = 0
        init(_ object: [UInt8]) { self.object = object }
        func next() async throws -> [UInt8]? {
            guard offset < object.count else { return nil }
            let end = min(offset + 65_536, object.count)
            defer { offset = end }
            return Array(object[offset..<end])
        }
        func cancel() async {}
    }
    func get(_ url: String, maximumBytes: Int) async throws -> AttachmentResponse {
        AttachmentResponse(status: 200, announcedLength: object.count, location: nil, body: Body(object))
    }
}

/// Raw libsodium secretstream loops over 64 KiB chunks in memory, with reused buffers and no SealedPush code:
/// the floors the media numbers are compared with.
enum RawStreamLoops {
    static let chunk = 65_536

    /// Pushes `paddedLength` bytes as 64 KiB chunks (the last `TAG_FINAL`); returns the loop's time.
    static func push(paddedLength: Int) -> Duration {
        _ = sodium_init()
        var state = crypto_secretstream_xchacha20poly1305_state()
        var key = [UInt8](repeating: 0, count: 32), header = [UInt8](repeating: 0, count: 24)
        var plain = [UInt8](repeating: 0xA5, count: chunk), cipher = [UInt8](repeating: 0, count: chunk + 17)
        let ad = MediaObjectFormat.additionalData(size: paddedLength - 1, type: "video/mp4")
        randombytes_buf(&key, 32)
        let clock = ContinuousClock()
        let start = clock.now
        _ = crypto_secretstream_xchacha20poly1305_init_push(&state, &header, key)
        var done = 0
        while done < paddedLength {
            let n = min(chunk, paddedLength - done)
            let tag: UInt8 = done + n == paddedLength ? 3 : 0
            _ = crypto_secretstream_xchacha20poly1305_push(&state, &cipher, nil, &plain, UInt64(n), ad, UInt64(ad.count), tag)
            done += n
        }
        return clock.now - start
    }

    /// The bytes the pull-and-write floor gathers before each `write` (1 MiB, page-aligned).
    static let writeBuffer = 1 << 20

    /// Pulls every chunk of `object` under `key` like `pull`, and writes the file (the first `size` plaintext
    /// bytes, not the padding) to a new file at `path`: `open(O_CREAT | O_EXCL)`, one `write` per full 1 MiB
    /// page-aligned buffer, `fdatasync` once at the end (then `POSIX_FADV_DONTNEED` on Linux), `close`.
    /// Returns the loop's time, from the file's creation to its close; the file is removed afterwards.
    static func pullAndWrite(object: [UInt8], key: SecureBytes, additionalData ad: [UInt8], size: Int, path: String) -> Duration {
        _ = sodium_init()
        var state = crypto_secretstream_xchacha20poly1305_state()
        let keyBytes = key.unsafeCopyToArray()
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: writeBuffer, alignment: 4096)
        buffer.initializeMemory(as: UInt8.self, repeating: 0, count: writeBuffer)
        defer { buffer.deallocate() }
        var plain = [UInt8](repeating: 0, count: chunk)
        var tag: UInt8 = 0
        var failures = 0, writeFailures = 0
        func writeAll(_ fd: Int32, _ count: Int) {
            var done = 0
            while done < count {
                let n = write(fd, buffer + done, count - done)
                if n < 0 { if errno == EINTR { continue }; writeFailures += 1; return }
                done += n
            }
        }
        let clock = ContinuousClock()
        var elapsed = Duration.zero
        object.withUnsafeBufferPointer { o in
            let start = clock.now
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            precondition(fd >= 0, "the pull-and-write floor cannot create \(path)")
            _ = crypto_secretstream_xchacha20poly1305_init_pull(&state, o.baseAddress!, keyBytes)
            var offset = 24, produced = 0, filled = 0
            while offset < o.count {
                let n = min(chunk + 17, o.count - offset)
                if crypto_secretstream_xchacha20poly1305_pull(&state, &plain, nil, &tag, o.baseAddress! + offset, UInt64(n), ad, UInt64(ad.count)) != 0 {
                    failures += 1
                }
                offset += n
                // The file's bytes of this chunk (none of the padding), gathered into the write buffer.
                var take = max(0, min(n - 17, size - produced))
                produced += n - 17
                var from = 0
                while take > 0 {
                    let m = min(take, writeBuffer - filled)
                    plain.withUnsafeBytes { (buffer + filled).copyMemory(from: $0.baseAddress! + from, byteCount: m) }
                    filled += m; from += m; take -= m
                    if filled == writeBuffer { writeAll(fd, filled); filled = 0 }
                }
            }
            if filled > 0 { writeAll(fd, filled) }
            if fdatasync(fd) != 0 { writeFailures += 1 }
            _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
            _ = close(fd)
            elapsed = clock.now - start
        }
        _ = unlink(path)
        precondition(failures == 0, "the raw pull-and-write loop failed to authenticate \(failures) chunks")
        precondition(writeFailures == 0, "the raw pull-and-write loop failed to write its file")
        return elapsed
    }

    /// Pulls every chunk of `object` (header, then 64 KiB + 17-byte chunks) under `key`; returns the loop's time.
    static func pull(object: [UInt8], key: SecureBytes, additionalData ad: [UInt8]) -> Duration {
        _ = sodium_init()
        var state = crypto_secretstream_xchacha20poly1305_state()
        let keyBytes = key.unsafeCopyToArray()
        var plain = [UInt8](repeating: 0, count: chunk)
        var tag: UInt8 = 0
        var failures = 0
        let clock = ContinuousClock()
        var elapsed = Duration.zero
        object.withUnsafeBufferPointer { o in
            let start = clock.now
            _ = crypto_secretstream_xchacha20poly1305_init_pull(&state, o.baseAddress!, keyBytes)
            var offset = 24
            while offset < o.count {
                let n = min(chunk + 17, o.count - offset)
                // The real AD: a chunk that fails its MAC is not decrypted, which would make the floor too fast.
                if crypto_secretstream_xchacha20poly1305_pull(&state, &plain, nil, &tag, o.baseAddress! + offset, UInt64(n), ad, UInt64(ad.count)) != 0 {
                    failures += 1
                }
                offset += n
            }
            elapsed = clock.now - start
        }
        precondition(failures == 0, "the raw pull loop failed to authenticate \(failures) chunks")
        return elapsed
    }
}
