import SealedPushCrypto
import SealedPushReceiver
import Synchronization

/// The network of the memory benchmark: media objects served from files, each body handed over in 64 KiB
/// pieces, as `URLSessionAttachmentFetcher` does on iOS (a download task writes the object to a file, which the
/// pipeline reads in 64 KiB pieces). No object is ever in memory: a piece is read from the file when the
/// pipeline asks for it, and the reading task yields before every piece, as a body arriving from a network does,
/// so that the attachments of one message are downloaded and decrypted side by side even on few cores.
///
/// A URL answers with the file of the same last path component in `directory`; anything else is a 404.
final class FileFetcher: AttachmentFetcher {
    /// The bytes of one piece (URLSessionAttachmentFetcher.pieceSize).
    static let pieceSize = 65_536

    let directory: String
    /// Bodies being read now, and the most read at once.
    private let open = Mutex<(now: Int, most: Int)>((0, 0))

    init(directory: String) { self.directory = directory }

    /// The most bodies that were being read at the same time.
    var mostInFlight: Int { open.withLock { $0.most } }

    func get(_ url: String, maximumBytes: Int) async throws -> AttachmentResponse {
        await Task.yield()
        guard let name = url.split(separator: "/").last, !name.contains(".."),
              let reader = try? MediaFileReader(path: directory + "/" + name, followingSymlinks: false) else {
            return AttachmentResponse(status: 404, announcedLength: 0, location: nil, body: Body(reader: nil, limit: 0, fetcher: self))
        }
        open.withLock {
            $0.now += 1
            $0.most = max($0.most, $0.now)
        }
        return AttachmentResponse(status: 200, announcedLength: reader.size, location: nil, body: Body(reader: reader, limit: maximumBytes, fetcher: self))
    }

    fileprivate func closed() { open.withLock { $0.now -= 1 } }

    /// One body: the open file, read a piece at a time by one task.
    final class Body: AttachmentByteStream {
        private let state: Mutex<(reader: MediaFileReader?, read: Int)>
        private let limit: Int
        private let fetcher: FileFetcher

        init(reader: sending MediaFileReader?, limit: Int, fetcher: FileFetcher) {
            state = Mutex((reader, 0))
            self.limit = limit
            self.fetcher = fetcher
        }

        func next() async throws -> [UInt8]? {
            await Task.yield()
            let (piece, ended) = try state.withLock { s throws -> ([UInt8]?, Bool) in
                guard let reader = s.reader else { return (nil, false) }
                let piece = try reader.read(upTo: FileFetcher.pieceSize)
                if piece.isEmpty {
                    s.reader = nil
                    return (nil, true)
                }
                s.read += piece.count
                if s.read > limit { throw AttachmentBodyTooLarge(limit: limit) }
                return (piece, false)
            }
            if ended { fetcher.closed() }
            return piece
        }

        func cancel() async {
            let wasOpen = state.withLock { s -> Bool in
                defer { s.reader = nil }
                return s.reader != nil
            }
            if wasOpen { fetcher.closed() }
        }
    }
}
