public import SealedPushReceiver
import Synchronization

/// An in-memory `AttachmentFetcher` for tests: each URL answers with a fixed response.
public final class MemoryFetcher: AttachmentFetcher {
    /// How one URL answers.
    public enum Route: Sendable {
        /// Status 200 with these bytes, in pieces of `piece` bytes; `announce` sends their length.
        case object([UInt8], piece: Int = 4096, announce: Bool = true)
        /// This status with an empty body.
        case status(Int)
        /// A redirect (302) to `location`.
        case redirect(String)
        /// The connection fails.
        case connectionFailure
        /// Status 200 and `announcedLength`, then zero bytes forever (or until cancelled).
        case endless(announcedLength: Int?)
        /// Status 200, then the body never arrives (until cancelled).
        case stall
    }

    let routes: [String: Route]
    let sent = Atomic<Int>(0)
    let stalls = Atomic<Int>(0)
    let requests = Mutex<[String]>([])

    /// A fetcher answering `routes`; any other URL is a 404.
    public init(_ routes: [String: Route]) { self.routes = routes }

    /// The body bytes handed out so far, over all requests.
    public var bytesSent: Int { sent.load(ordering: .relaxed) }
    /// How many reads of a `.stall` body have begun (a test waits for one before it cancels).
    public var stalledReads: Int { stalls.load(ordering: .relaxed) }
    /// Every URL requested, in order.
    public var requested: [String] { requests.withLock { $0 } }

    /// Answers from the routes.
    public func get(_ url: String, maximumBytes: Int) async throws -> AttachmentResponse {
        requests.withLock { $0.append(url) }
        switch routes[url] ?? .status(404) {
        case let .object(bytes, piece, announce):
            return AttachmentResponse(status: 200, announcedLength: announce ? bytes.count : nil, location: nil,
                                      body: Stream(pieces: stride(from: 0, to: bytes.count, by: piece).map { Array(bytes[$0..<min($0 + piece, bytes.count)]) }, fetcher: self))
        case let .status(code):
            return AttachmentResponse(status: code, announcedLength: 0, location: nil, body: Stream(pieces: [], fetcher: self))
        case let .redirect(location):
            return AttachmentResponse(status: 302, announcedLength: 0, location: location, body: Stream(pieces: [], fetcher: self))
        case .connectionFailure:
            throw ConnectionRefused()
        case let .endless(length):
            return AttachmentResponse(status: 200, announcedLength: length, location: nil, body: Stream(pieces: nil, fetcher: self))
        case .stall:
            return AttachmentResponse(status: 200, announcedLength: nil, location: nil, body: Stalled(fetcher: self))
        }
    }

    struct ConnectionRefused: Error {}

    final class Stream: AttachmentByteStream {
        let pieces: [[UInt8]]?
        let index = Atomic<Int>(0)
        let fetcher: MemoryFetcher
        init(pieces: [[UInt8]]?, fetcher: MemoryFetcher) { self.pieces = pieces; self.fetcher = fetcher }
        func next() async throws -> [UInt8]? {
            let i = index.add(1, ordering: .relaxed).oldValue
            guard let pieces else {
                fetcher.sent.add(1000, ordering: .relaxed)
                return [UInt8](repeating: 0, count: 1000)
            }
            guard i < pieces.count else { return nil }
            fetcher.sent.add(pieces[i].count, ordering: .relaxed)
            return pieces[i]
        }
        func cancel() async {}
    }

    struct Stalled: AttachmentByteStream {
        let fetcher: MemoryFetcher
        func next() async throws -> [UInt8]? {
            fetcher.stalls.add(1, ordering: .relaxed)
            while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
            throw CancellationError()
        }
        func cancel() async {}
    }
}
