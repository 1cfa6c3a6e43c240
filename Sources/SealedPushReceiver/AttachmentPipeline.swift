public import SealedPushWire
public import SealedPushCrypto

/// Why one attachment was not attached (attachments v1 §4): the message still shows its text.
public struct AttachmentFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The descriptor's id.
    public var identifier: String
    /// The §4 reason code.
    public var reason: ReasonCode
    /// A short explanation, without content, keys or URLs.
    public var detail: String

    /// A failure from its parts.
    public init(identifier: String, reason: ReasonCode, detail: String) {
        self.identifier = identifier
        self.reason = reason
        self.detail = detail
    }

    /// `id: reason (detail)`.
    public var description: String { "\(identifier): \(reason.rawValue) (\(detail))" }
}

/// Why the attachments directory cannot be used; says which path and how to fix it.
public struct AttachmentDirectoryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The directory's path.
    public var path: String
    /// What is wrong with it.
    public var problem: PrivateDirectoryProblem

    /// An error from its parts.
    public init(path: String, problem: PrivateDirectoryProblem) {
        self.path = path
        self.problem = problem
    }

    /// What is wrong, and what to do.
    public var description: String {
        let why: String
        switch problem {
        case let .unusable(code):
            why = "cannot be used or created (\(PrivateDirectory.describe(errno: code))); make sure its parent directory exists, or choose another directory"
        case .symbolicLink:
            why = "is a symbolic link; give the real directory, private to you (mkdir -m 700)"
        case .notDirectory:
            why = "is not a directory; remove it or choose another directory"
        case let .notOwner(owner):
            why = "belongs to user \(owner), who could replace the decrypted files; use a directory of your own (mkdir -m 700)"
        case let .accessibleByOthers(mode):
            why = "is open to other users (mode \(String(mode, radix: 8))), who could read or replace the decrypted files; run chmod 700 on it"
        }
        return "the attachments directory \(path) \(why)"
    }
}

/// Fetches, verifies, decrypts and writes one attachment, applying the §4 checks in order:
/// type, declared size, URL (under `policy`), HTTP (at most 3 redirects, never to a refused URL nor from
/// `https` to `http`, status 200), announced length, then the streamed object (the byte cap enforced while
/// reading, every chunk decrypted as it arrives), the file's signature, and storage.
///
/// Never holds the object or the file: one 64 KiB chunk of ciphertext, and the decrypted file in
/// `writeBuffers` page-aligned buffers of at most `writeBufferSize` bytes, the file's size when smaller (wiped when
/// released). Each chunk is
/// decrypted straight into the current buffer; a full buffer is written with one `write` on a background
/// queue while the next one fills, so fetching (the fetcher's own threads), decrypting (this task) and
/// writing (that queue) overlap, and the download waits for the disk only when both buffers are full. Once
/// the object verified, the file is `fdatasync`ed once (`fsync` on Apple platforms; on Linux its pages are
/// then dropped from the page cache) and renamed. The directory is private (`0700`, this user's, not a
/// symbolic link: checked, or made, when the pipeline is made). Each download goes to a hidden temporary file
/// (`.NAME.partial`, `O_CREAT | O_EXCL | O_NOFOLLOW`, `0600`) that is renamed to its final name (random,
/// with the type's extension) only after the whole object verified and reached the disk; a failed or
/// cancelled attachment leaves no file (what the buffers held is wiped, never written). Cancelling the task fails it with `attachmentTimeExpired`. Nothing deletes the
/// files iOS would move away: `removeFiles(olderThan:)` does, for a device that is not iOS.
public struct AttachmentPipeline: Sendable {
    /// How the media object is fetched.
    public let fetcher: any AttachmentFetcher
    /// The directory files are written to (the app group's container on iOS).
    public let directory: String
    /// Which URLs may be fetched: `.production` unless a development setup asks for `.development`.
    public let policy: AttachmentURLPolicy
    /// The most redirects followed.
    public static let maximumRedirects = 3
    /// The bytes of decrypted file gathered before each `write` (512 KiB: 8 chunks).
    public static let writeBufferSize = 512 * 1024

    /// The write buffers for a file of `size` bytes: `writeBufferSize`, or less for a smaller file (its size rounded
    /// up to whole 4 KiB pages): four small images in flight hold a few hundred KiB, not four times 1 MiB.
    static func writeBufferSize(forFileOf size: Int) -> Int {
        let pages = (max(size, 1) + 4095) / 4096
        return min(writeBufferSize, pages * 4096)
    }
    /// The write buffers of one attachment: one is written in the background while the next fills.
    public static let writeBuffers = 2
    /// How long a simulated device keeps attachment files before `removeFiles(olderThan:)` removes them.
    public static let defaultFileLifetime: Duration = .seconds(3600)

    /// A pipeline writing into `directory` through `fetcher`, fetching what `policy` allows.
    ///
    /// `directory` must be private to this user: a directory (not a symbolic link) owned by the user running
    /// the process, without group or other access. It is made (`0700`, its parent must exist) when missing.
    public init(fetcher: any AttachmentFetcher, directory: String, policy: AttachmentURLPolicy = .production) throws(AttachmentDirectoryError) {
        do { try PrivateDirectory.prepare(directory, create: true) } catch {
            throw AttachmentDirectoryError(path: directory, problem: error)
        }
        self.fetcher = fetcher
        self.directory = directory
        self.policy = policy
    }

    /// Whether `name` is one the pipeline writes: a final name (16 base64url characters and a type's
    /// extension) or its hidden temporary name (`.` final name `.partial`).
    public static func isPipelineFileName(_ name: String) -> Bool {
        var final = Substring(name)
        if final.hasPrefix("."), final.hasSuffix(".partial") { final = final.dropFirst().dropLast(".partial".count) }
        guard let ext = MediaType.all.first(where: { final.hasSuffix($0.fileExtension) })?.fileExtension else { return false }
        let stem = final.dropLast(ext.count)
        return stem.utf8.count == 16 && stem.utf8.allSatisfy { b in
            (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x5F
        }
    }

    /// Removes the files the pipeline wrote (finished or left partial by a killed process) that were last
    /// modified more than `age` before `now` (seconds since 1970; the wall clock when `nil`), and returns
    /// how many it removed. Other entries of the directory are left alone.
    @discardableResult
    public func removeFiles(olderThan age: Duration, now: Int64? = nil) -> Int {
        let cutoff = (now ?? PrivateDirectory.currentTime()) - age.components.seconds
        guard let entries = try? PrivateDirectory.entries(of: directory) else { return 0 }
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        var removed = 0
        for entry in entries where entry.isRegularFile && entry.modified < cutoff && Self.isPipelineFileName(entry.name) {
            if PrivateDirectory.removeFile(base + entry.name) { removed += 1 }
        }
        return removed
    }

    /// Removes every file the pipeline wrote, whatever its age (a content extension's private temporary
    /// directory when its view goes away); returns how many it removed. Other entries are left alone.
    @discardableResult
    public func removeAllFiles() -> Int { removeFiles(olderThan: .zero, now: .max) }

    /// Runs every descriptor in parallel; results in descriptor order.
    public func run(_ descriptors: [AttachmentDescriptor]) async -> [Result<NotificationAttachment, AttachmentFailure>] {
        await withTaskGroup(of: (Int, Result<NotificationAttachment, AttachmentFailure>).self) { group in
            for (index, descriptor) in descriptors.enumerated() {
                group.addTask { (index, await self.run(descriptor)) }
            }
            var results = [Result<NotificationAttachment, AttachmentFailure>?](repeating: nil, count: descriptors.count)
            for await (index, result) in group { results[index] = result }
            return results.enumerated().map { index, result in
                result ?? .failure(AttachmentFailure(identifier: descriptors[index].id, reason: .attachmentTimeExpired, detail: "not finished"))
            }
        }
    }

    /// Runs one descriptor to a written file or the first failed check.
    public func run(_ descriptor: AttachmentDescriptor) async -> Result<NotificationAttachment, AttachmentFailure> {
        do {
            return .success(try await attach(descriptor))
        } catch let failure as AttachmentFailure {
            return .failure(failure)
        } catch {
            // Only `attach` throws, and it throws only AttachmentFailure; cancellation is reported as such.
            return .failure(AttachmentFailure(identifier: descriptor.id, reason: Task.isCancelled ? .attachmentTimeExpired : .attachmentUnavailable,
                                              detail: "unexpected failure"))
        }
    }

    private func attach(_ d: AttachmentDescriptor) async throws -> NotificationAttachment {
        func fail(_ reason: ReasonCode, _ detail: String) -> AttachmentFailure {
            AttachmentFailure(identifier: d.id, reason: Task.isCancelled && reason != .attachmentStorageFailed ? .attachmentTimeExpired : reason,
                              detail: Task.isCancelled ? "the time ran out" : detail)
        }
        guard let type = MediaType.named(d.type) else { throw fail(.attachmentUnsupportedType, "type \(d.type) is not in the table") }
        guard d.size <= type.kind.sizeLimit else {
            throw fail(.attachmentTooLarge, "\(d.size) bytes is over the \(type.kind.sizeLimit)-byte \(type.kind.rawValue) limit")
        }
        if let problem = policy.problem(d.url) { throw fail(.attachmentInsecureURL, problem) }
        let limit = MediaObjectFormat.maximumObjectLength(size: d.size)

        // HTTP, following at most 3 redirects, each checked like the first URL.
        var url = d.url
        var redirects = 0
        var response: AttachmentResponse
        while true {
            if Task.isCancelled { throw fail(.attachmentTimeExpired, "the time ran out") }
            do { response = try await fetcher.get(url, maximumBytes: limit) } catch {
                throw fail(.attachmentUnavailable, "the connection failed")
            }
            guard (300...399).contains(response.status), let location = response.location else { break }
            await response.body.cancel()
            guard let next = AttachmentURLPolicy.resolve(location, against: url) else {
                throw fail(.attachmentInsecureURL, "a redirect goes to a URL that cannot be resolved")
            }
            if let problem = policy.redirectProblem(from: url, to: next) { throw fail(.attachmentInsecureURL, problem) }
            redirects += 1
            guard redirects <= Self.maximumRedirects else { throw fail(.attachmentUnavailable, "more than \(Self.maximumRedirects) redirects") }
            url = next
        }
        guard response.status == 200 else {
            await response.body.cancel()
            throw fail(.attachmentUnavailable, "HTTP status \(response.status)")
        }
        if let announced = response.announcedLength, announced > limit {
            await response.body.cancel()
            throw fail(.attachmentTooLarge, "the server announced \(announced) bytes, over the \(limit) the object can be")
        }

        // The file: a hidden temporary one created before the download, renamed to `path` only once the whole
        // object verified, removed on any failure.
        let name = Base64.encodeURLSafeNoPadding(CryptoLibrary.randomBytes(count: 12)) + type.fileExtension
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        let path = base + name
        let handle: MediaFileWriter
        do {
            handle = try MediaFileWriter(creating: base + "." + name + ".partial", mode: 0o600, bufferSize: Self.writeBufferSize(forFileOf: d.size),
                                         buffers: Self.writeBuffers, keepingFirst: MediaType.signaturePrefixLength)
        } catch {
            await response.body.cancel()
            throw fail(.attachmentStorageFailed, "cannot create a file in the attachments directory")
        }
        func cleanUp() { handle.remove() }
        let decryptor: MediaObjectDecryptor
        do { decryptor = try MediaObjectDecryptor(key: d.key, size: d.size, type: type.mime) } catch {
            cleanUp()
            throw fail(.attachmentCorrupt, "the key cannot be used")
        }
        do {
            while true {
                if Task.isCancelled { throw fail(.attachmentTimeExpired, "the time ran out") }
                let piece: [UInt8]?
                do { piece = try await response.body.next() } catch is AttachmentBodyTooLarge {
                    throw fail(.attachmentTooLarge, "the server sent more than the \(limit) bytes the object can be")
                } catch {
                    throw fail(.attachmentUnavailable, "the connection failed while reading")
                }
                guard let piece else { break }
                try decryptor.consume(piece, into: handle)
            }
            try decryptor.finish(into: handle)
            guard type.matches(prefix: handle.firstBytes) else { throw fail(.attachmentTypeMismatch, "the file does not start as \(type.mime) does") }
            if Task.isCancelled { throw fail(.attachmentTimeExpired, "the time ran out") }
            // On the storage device before it gets its name, once: a crash never leaves a named file that is
            // shorter than it was (a rename can reach the disk before the data it names).
            try handle.synchronize()
            if Task.isCancelled { throw fail(.attachmentTimeExpired, "the time ran out") }
            try handle.commit(renamingTo: path)
        } catch let failure as AttachmentFailure {
            await response.body.cancel()
            cleanUp()
            throw failure
        } catch let error as MediaObjectError {
            await response.body.cancel()
            cleanUp()
            switch error {
            case .tooLarge: throw fail(.attachmentTooLarge, "the server sent more than the \(limit) bytes the object can be")
            case .corrupt, .sizeMismatch: throw fail(.attachmentCorrupt, error.description)
            }
        } catch {
            await response.body.cancel()
            cleanUp()
            throw fail(.attachmentStorageFailed, "the file cannot be written")
        }
        if Task.isCancelled {
            PrivateDirectory.removeFile(path)
            throw fail(.attachmentTimeExpired, "the time ran out")
        }
        return NotificationAttachment(identifier: d.id, url: path, type: type.mime, size: Int64(d.size),
                                      thumbnailHidden: d.thumbnailHidden, thumbnailTime: d.thumbnailTime)
    }
}

extension ReceiptAttachmentCounts {
    /// The receipt's counts for `attached` attachments and the ones that failed, by reason code.
    init(attached: Int, failures: [AttachmentFailure]) {
        var failed: [String: Int] = [:]
        for failure in failures { failed[failure.reason.rawValue, default: 0] += 1 }
        self.init(attached: attached, failed: failed)
    }
}
