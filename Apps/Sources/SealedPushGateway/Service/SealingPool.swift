import SealedPushAPNs
import SealedPushCrypto
import SealedPushSender
import SealedPushWire

/// Where the gateway seals messages: off the request's task, in chunks run as child tasks, with at most
/// `width` chunks sealing at once across every request in the process. A fan-out of thousands of devices then
/// uses the cores it is given without starving the servers' other requests of the concurrency pool, and many
/// large sends at once wait for their turn instead of multiplying the CPU and memory they hold.
final class SealingPool: Sendable {
    /// Chunks sealing at once, across requests.
    let width: Int
    let limiter: AsyncLimiter
    /// Devices sealed per chunk: large enough that a chunk's task costs little beside its seals (about 60 µs each).
    static let chunkSize = 64

    /// A pool sealing at most `width` chunks at once.
    init(width: Int) {
        self.width = max(1, width)
        limiter = AsyncLimiter(limit: self.width)
    }

    /// `message` sealed by `sender` to each record, in the records' order: each the sealed notification or why it
    /// could not be made.
    func seal(_ message: SecretMessage, to records: [DeviceKeyRecord], with sender: NotificationSender) async throws
        -> [Result<SealedNotification, SenderError>] {
        guard records.count > Self.chunkSize else {
            // One chunk: sealed here, still counted against the pool's width.
            try await limiter.acquire()
            defer { limiter.release() }
            return records.map { record in Result { () throws(SenderError) in try sender.seal(message, to: record) } }
        }
        var results = [Result<SealedNotification, SenderError>?](repeating: nil, count: records.count)
        try await withThrowingTaskGroup(of: (Int, [Result<SealedNotification, SenderError>]).self) { group in
            for start in stride(from: 0, to: records.count, by: Self.chunkSize) {
                let chunk = Array(records[start..<min(start + Self.chunkSize, records.count)])
                group.addTask { [limiter] in
                    try await limiter.acquire()
                    defer { limiter.release() }
                    return (start, chunk.map { record in Result { () throws(SenderError) in try sender.seal(message, to: record) } })
                }
            }
            for try await (start, sealed) in group {
                for (offset, result) in sealed.enumerated() { results[start + offset] = result }
            }
        }
        return results.map { $0! }
    }

    /// Whether a sealed box can be made to `key` at all: libsodium refuses a low-order point (its shared secret
    /// would be all zeros), so such a key fails every message sealed to it.
    static func canSeal(to key: BoxPublicKey) -> Bool {
        (try? SealedBox.seal(SecureBytes([0]), to: key)) != nil
    }
}
