public import SealedPushCrypto
public import SealedPushWire
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A file to send with a message (attachments v1): where its bytes come from, its type, and how iOS shows it.
///
/// `MediaSealer.encrypt(_:id:to:)` turns it into an encrypted media object in a `MediaObjectStore` and the
/// `AttachmentDescriptor` the sealed body carries.
public struct MediaAttachment: Sendable {
    /// Where the file's bytes come from.
    public enum Source: Sendable {
        /// A file on disk at a path the API caller chose, read 64 KiB at a time (symbolic links followed).
        /// For paths that come from input (a batch line), use `sourceFile`.
        case file(path: String)
        /// A file inside a media source directory: `path` is resolved in it and may not leave it (see
        /// `MediaSource.open(_:)`).
        case sourceFile(path: String, in: MediaSource)
        /// A byte stream of exactly `size` bytes: `next` returns the next bytes, or an empty array at the end.
        case stream(size: Int, label: String, next: @Sendable () throws -> [UInt8])

        /// The path or label that error messages name.
        public var label: String {
            switch self {
            case let .file(path): return path
            case let .sourceFile(path, _): return path
            case let .stream(_, label, _): return label
            }
        }
    }

    /// Where the bytes come from.
    public var source: Source
    /// The MIME type (§3 table); `nil` to take it from the file name's extension.
    public var type: String?
    /// A display name (1–128 characters, no `/`, `\` or NUL), or `nil`.
    public var name: String?
    /// Hide the thumbnail (`UNNotificationAttachmentOptionsThumbnailHiddenKey`).
    public var thumbnailHidden: Bool?
    /// Seconds into a movie, or frame of an animated image, for the thumbnail.
    public var thumbnailTime: Int64?
    /// How much the object is padded (default Padmé).
    public var padding: MediaPadding

    /// An attachment from its parts.
    public init(source: Source, type: String? = nil, name: String? = nil, thumbnailHidden: Bool? = nil,
                thumbnailTime: Int64? = nil, padding: MediaPadding = .padme) {
        self.source = source
        self.type = type
        self.name = name
        self.thumbnailHidden = thumbnailHidden
        self.thumbnailTime = thumbnailTime
        self.padding = padding
    }

    /// A file attachment at a path the API caller chose; the type defaults to the one its extension names.
    public init(file path: String, type: String? = nil, name: String? = nil) {
        self.init(source: .file(path: path), type: type, name: name)
    }

    /// A file attachment confined to `source`: `path` is relative to its directory; the type defaults to the
    /// one its extension names.
    public init(file path: String, in source: MediaSource, type: String? = nil, name: String? = nil) {
        self.init(source: .sourceFile(path: path, in: source), type: type, name: name)
    }
}

/// The directory attachment files may be read from when their paths come from input (a batch line): a path
/// is resolved inside it and can never reach a file outside it.
///
/// A relative path is taken inside the directory; an absolute path, or `..` that climbs out of it, is refused.
/// The real path of the file's directory (every symbolic link resolved) must still lie inside the directory's
/// real path, and the file itself is opened with `O_NOFOLLOW` and must be a regular file.
public struct MediaSource: Sendable, Equatable {
    /// The directory as given.
    public let directory: String
    /// Its real path (symbolic links resolved) when the source was made.
    public let realDirectory: String

    /// A source over `directory`, which must exist and be a directory.
    public init(directory: String) throws(SenderError) {
        let real: String
        do { real = try PrivateDirectory.realPath(directory) } catch {
            throw .invalidAttachment("the media source directory \(directory) cannot be used (\(Self.describe(error))); give an existing directory")
        }
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: real, isDirectory: &isDirectory), isDirectory else {
            throw .invalidAttachment("the media source directory \(directory) is not a directory; give the directory the attachment files are in")
        }
        self.directory = directory
        self.realDirectory = real
    }

    /// Whether `realPath` (already resolved) is the directory or inside it.
    func contains(realPath: String) -> Bool {
        realPath == realDirectory || realPath.hasPrefix(realDirectory == "/" ? "/" : realDirectory + "/")
    }

    /// Opens `path` (relative to the directory) for reading, or refuses it with an error naming the path and
    /// the directory: an absolute path, `..` leading outside, a directory that resolves outside (through a
    /// symbolic link), a file that is a symbolic link, or anything but a regular file.
    public func open(_ path: String) throws(SenderError) -> MediaFileReader {
        func refuse(_ why: String) -> SenderError {
            .invalidAttachment("\(path): \(why) (media source directory \(directory))")
        }
        guard !path.isEmpty, !path.unicodeScalars.contains("\u{0}") else { throw refuse("the path is empty or holds a NUL") }
        guard !path.hasPrefix("/") else {
            throw refuse("is an absolute path; give the path relative to the media source directory")
        }
        var components: [Substring] = []
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch component {
            case ".": continue
            case "..":
                guard !components.isEmpty else { throw refuse("leads outside the media source directory (..); only files inside it can be sent") }
                components.removeLast()
            default: components.append(component)
            }
        }
        guard let name = components.popLast() else { throw refuse("names the directory itself, not a file in it") }
        let parent = ([realDirectory == "/" ? "" : realDirectory] + components.map(String.init)).joined(separator: "/")
        let realParent: String
        do { realParent = try PrivateDirectory.realPath(parent.isEmpty ? "/" : parent) } catch {
            throw refuse("cannot be read (\(Self.describe(error))); check the path")
        }
        guard contains(realPath: realParent) else {
            throw refuse("leads outside the media source directory through a symbolic link; only files inside it can be sent")
        }
        do {
            return try MediaFileReader(path: (realParent == "/" ? "" : realParent) + "/" + name, followingSymlinks: false)
        } catch {
            if error.isSymbolicLink { throw refuse("is a symbolic link; attachments are read only from regular files inside the media source directory") }
            if error.isNotRegularFile { throw refuse("is not a regular file") }
            throw refuse("cannot be read (\(PrivateDirectory.describe(errno: error.code))); check the path and its permissions")
        }
    }

    static func describe(_ problem: PrivateDirectoryProblem) -> String {
        if case let .unusable(code) = problem { return PrivateDirectory.describe(errno: code) }
        return "\(problem)"
    }
}

/// Somewhere encrypted media objects go: a directory a web server serves, a CDN upload, a caller's sink.
///
/// Implement it to stream objects elsewhere: `createObject()` returns a writer that knows the URL the
/// object will be served at; the sealer writes the object through it, then commits or discards it.
public protocol MediaObjectStore: Sendable {
    /// Starts a new object with an unguessable name.
    func createObject() throws -> any MediaObjectWriter
}

/// One object being written to a store. Used by one task: write, then exactly one of commit or discard.
public protocol MediaObjectWriter: AnyObject {
    /// The URL the device will fetch the object from (`https`, or `http` to loopback for development).
    var url: String { get }
    /// Appends object bytes.
    func write(_ bytes: [UInt8]) throws
    /// The object is complete: make it available at `url`.
    func commit() throws
    /// The object failed: remove whatever was written.
    func discard()
}

/// Writes objects as files in a directory, each named by 16 random bytes (base64url), served at `baseURL/NAME`.
///
/// An object is written to a hidden `.NAME.partial` file and renamed when complete, so a server never serves
/// half an object.
public struct DirectoryMediaStore: MediaObjectStore {
    /// The directory the objects are written to.
    public let directory: String
    /// The URL the directory is served at (without a trailing `/`).
    public let baseURL: String

    /// A store writing into `directory` (which must exist), served at `baseURL`.
    public init(directory: String, baseURL: String) throws(SenderError) {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory else {
            throw .invalidAttachment("the media directory \(directory) does not exist or is not a directory; create it first")
        }
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        // What a device in development accepts: a phone in the field takes https to public hosts only.
        guard AttachmentURLPolicy.development.isAllowed(base + "/x") else {
            throw .invalidAttachment("the media base URL \(baseURL) is not https (nor http to localhost, 127.0.0.0/8 or [::1]); devices would refuse it")
        }
        self.directory = directory
        self.baseURL = base
    }

    /// Creates `.NAME.partial` in the directory (never overwriting anything).
    public func createObject() throws -> any MediaObjectWriter {
        let name = Base64.encodeURLSafeNoPadding(CryptoLibrary.randomBytes(count: 16))
        return try FileObjectWriter(directory: directory, name: name, url: baseURL + "/" + name)
    }
}

/// A `DirectoryMediaStore` object on disk.
final class FileObjectWriter: MediaObjectWriter {
    let url: String
    let finalPath: String
    let file: MediaFileWriter

    init(directory: String, name: String, url: String) throws {
        self.url = url
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        finalPath = base + name
        do { file = try MediaFileWriter(creating: base + ".\(name).partial", mode: 0o644) } catch {
            throw SenderError.invalidAttachment("cannot create a media object in \(directory) (\(error)); check that it is writable")
        }
    }

    func write(_ bytes: [UInt8]) throws { try file.write(bytes) }

    /// Closes and renames the object into place. Not fsynced: an object cut short by a crash is refused by
    /// every device (`attachmentCorrupt`), never misread.
    func commit() throws {
        try file.close()
        try FileManager.default.moveItem(atPath: file.path, toPath: finalPath)
    }

    func discard() { file.remove() }
}

/// Encrypts attachments into media objects (attachments v1 §2) and returns their descriptors.
public enum MediaSealer {
    /// Bytes read from a file per step.
    static let readSize = MediaObjectFormat.chunkSize

    /// The table row for `attachment`, or an error naming the file, its type and the supported ones.
    public static func mediaType(of attachment: MediaAttachment) throws(SenderError) -> MediaType {
        let label = attachment.source.label
        let supported = MediaType.all.map(\.mime).joined(separator: ", ")
        if let type = attachment.type {
            guard let t = MediaType.named(type) else {
                throw .invalidAttachment("\(label): type \(type) is not supported (supported: \(supported))")
            }
            return t
        }
        let last = label.split(separator: "/").last.map(String.init) ?? label
        let ext = last.contains(".") ? String(last.split(separator: ".").last ?? "") : ""
        guard let t = MediaType.forFileExtension(ext) else {
            throw .invalidAttachment("\(label): cannot tell the type from the extension '\(ext)'; give it (supported: \(supported))")
        }
        return t
    }

    /// Encrypts `attachment` under a fresh key into a new object of `store`, and returns its descriptor.
    ///
    /// Refuses an unsupported type, an empty file, a file over its kind's limit, or a file that does not start
    /// as its type's signature says, with an error naming the file, its size or type, and the limit. Nothing is
    /// left in the store on failure. Never holds more than one 64 KiB chunk of the file.
    public static func encrypt(_ attachment: MediaAttachment, id: String, to store: some MediaObjectStore) throws(SenderError) -> AttachmentDescriptor {
        let label = attachment.source.label
        guard AttachmentDescriptor.isValidID(id) else { throw .invalidAttachment("\(label): id '\(id)' must be 1 to 64 of A-Z a-z 0-9 . _ -") }
        if let name = attachment.name, !AttachmentDescriptor.isValidName(name) {
            throw .invalidAttachment("\(label): name must be 1 to 128 characters without '/', '\\' or NUL")
        }
        if let time = attachment.thumbnailTime, time < 0 { throw .invalidAttachment("\(label): thumbnail time must not be negative") }
        let type = try mediaType(of: attachment)
        var next: () throws -> [UInt8]
        let size: Int
        switch attachment.source {
        case let .file(path):
            let reader: MediaFileReader
            do { reader = try MediaFileReader(path: path) } catch {
                throw .invalidAttachment("\(path): cannot read the file (\(error)); check the path and its permissions")
            }
            size = reader.size
            next = { try reader.read(upTo: readSize) }
        case let .sourceFile(path, source):
            let reader = try source.open(path)
            size = reader.size
            next = { try reader.read(upTo: readSize) }
        case let .stream(streamSize, _, read):
            size = streamSize
            next = read
        }
        guard size >= 1 else { throw .invalidAttachment("\(label): the file is empty; an attachment needs at least 1 byte") }
        guard size <= type.kind.sizeLimit else {
            throw .invalidAttachment("\(label): \(size) bytes is over the \(type.kind.sizeLimit)-byte limit for \(type.kind.rawValue) attachments (\(type.mime))")
        }
        let key = SecretStream.generateKey()
        let writer: any MediaObjectWriter
        do { writer = try store.createObject() } catch { throw error as? SenderError ?? .invalidAttachment("\(label): cannot create the media object (\(error))") }
        do {
            let encryptor = try MediaObjectEncryptor(key: key, size: size, type: type.mime, padding: attachment.padding)
            var prefix: [UInt8] = []
            var read = 0
            while true {
                let bytes = try next()
                if bytes.isEmpty { break }
                read += bytes.count
                guard read <= size else { throw MediaObjectError.sizeMismatch(declared: size, given: read) }
                if prefix.count < MediaType.signaturePrefixLength { prefix += bytes.prefix(MediaType.signaturePrefixLength - prefix.count) }
                try encryptor.update(bytes, output: writer.write)
            }
            guard type.matches(prefix: prefix) || read != size else {
                throw SenderError.invalidAttachment("\(label): the file does not start as a \(type.mime) file does (devices would refuse it); check its type")
            }
            try encryptor.finish(output: writer.write)
            try writer.commit()
        } catch {
            writer.discard()
            if let e = error as? SenderError { throw e }
            if let e = error as? MediaObjectError { throw .invalidAttachment("\(label): \(e.description)") }
            throw .invalidAttachment("\(label): could not write the media object (\(error)); check the media directory or sink")
        }
        return AttachmentDescriptor(id: id, url: writer.url, key: key, type: type.mime, size: size, name: attachment.name,
                                    thumbnailHidden: attachment.thumbnailHidden, thumbnailTime: attachment.thumbnailTime)
    }

    /// Encrypts every attachment (ids `a1`, `a2`, … unless the list is given with ids) into `store`, in order.
    public static func encrypt(_ attachments: [MediaAttachment], to store: some MediaObjectStore) throws(SenderError) -> [AttachmentDescriptor] {
        guard attachments.count <= AttachmentDescriptor.maximumCount else {
            throw .invalidAttachment("\(attachments.count) attachments given; a message carries at most \(AttachmentDescriptor.maximumCount)")
        }
        var out: [AttachmentDescriptor] = []
        for (i, attachment) in attachments.enumerated() { out.append(try encrypt(attachment, id: "a\(i + 1)", to: store)) }
        return out
    }
}
