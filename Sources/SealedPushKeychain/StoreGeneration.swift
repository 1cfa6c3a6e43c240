import SystemPackage
import SealedPushKeyring
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The store's change counter: the file `generation` at the root, eight little-endian bytes.
///
/// Every transaction (every item write, key rotation, retirement, destruction, lock-state change)
/// moves it to a new odd value when it starts and to the next even value when it ends, under the
/// writers' lock. A reader that caches what it read (`CachedDeviceKeyring`) remembers the even
/// value it saw before reading and trusts its copy only while the counter still has that value:
/// one 8-byte `pread` instead of reading and decrypting item files. An odd value means a write is
/// in progress, or was interrupted by a crash and not yet recovered: readers then read the files.
///
/// The counter is not fsynced: it only has to be coherent between processes running now (the
/// page cache is), and a cache never outlives a reboot of the machine.
enum StoreGeneration {
    static let fileName = "generation"

    /// Moves the counter to a new odd value (a write begins) and returns the open descriptor; throws
    /// when the file cannot be opened or written (the transaction then does not run).
    static func begin(root: FilePath) throws(KeychainError) -> FileDescriptor {
        let path = root.appending(fileName)
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(path, .readWrite, options: [.create, .noFollow, .closeOnExec], permissions: [.ownerReadWrite])
        } catch { throw StoreIO.ioError("open the change counter", path, error) }
        do {
            let current = try read(fd) ?? 0
            let next = current | 1 == current ? current &+ 2 : current &+ 1
            try write(fd, next, path: path)
            DurabilityLog.note(.counter(next))
        } catch {
            try? fd.close()
            throw error
        }
        return fd
    }

    /// Moves the counter from the odd value of `begin` to the next even value (the write is over) and closes it.
    static func end(_ fd: FileDescriptor, root: FilePath) {
        defer { try? fd.close() }
        // A failure here leaves the counter odd: readers stop caching until the next write, which is safe.
        if let current = try? read(fd), current & 1 == 1 {
            if (try? write(fd, current &+ 1, path: root.appending(fileName))) != nil { DurabilityLog.note(.counter(current &+ 1)) }
        }
    }

    /// The counter's value, or `nil` if the file is shorter than 8 bytes (never written).
    static func read(_ fd: FileDescriptor) throws(KeychainError) -> UInt64? {
        var bytes = [UInt8](repeating: 0, count: 8)
        let n: Int
        do { n = try bytes.withUnsafeMutableBytes { try fd.read(fromAbsoluteOffset: 0, into: $0) } } catch {
            throw StoreIO.ioError("read the change counter", FilePath(fileName), error)
        }
        guard n == 8 else { return nil }
        return bytes.reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    private static func write(_ fd: FileDescriptor, _ value: UInt64, path: FilePath) throws(KeychainError) {
        let bytes = (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
        let n: Int
        do { n = try bytes.withUnsafeBytes { try fd.write(toAbsoluteOffset: 0, $0) } } catch {
            throw StoreIO.ioError("write the change counter", path, error)
        }
        guard n == 8 else { throw .io(operation: "write the change counter", path: path.string, errno: EIO) }
    }
}

/// What a reader saw of the change counter: its value, and which opening of the file it came from
/// (a store removed and made again at the same path starts its counter again, so a value alone
/// could repeat).
struct GenerationStamp: Equatable, Sendable {
    /// How many times the reader has opened the counter file.
    let opening: UInt64
    /// The counter's value.
    let value: UInt64
    /// An odd value: a write is in progress or was interrupted.
    var isWriting: Bool { value & 1 == 1 }
}

/// A reader's view of a store's change counter: the file opened once, read with one `pread`.
///
/// Access is serialised by its owner (`CachedDeviceKeyring` holds it inside a `Mutex`).
struct GenerationReader: ~Copyable {
    let root: FilePath
    private var fd: FileDescriptor?
    private var openings: UInt64 = 0

    init(root: FilePath) { self.root = root }

    deinit { try? fd?.close() }

    /// The counter now, or `nil` if it cannot be read (no file yet). When the store directory was
    /// removed and made again, the old file is unlinked: the descriptor is reopened and the stamp's
    /// `opening` changes, so nothing read from the old store is taken for current.
    mutating func current() -> GenerationStamp? {
        if let open = fd {
            var st = stat()
            if fstat(open.rawValue, &st) == 0, st.st_nlink > 0, let value = try? StoreGeneration.read(open) {
                return GenerationStamp(opening: openings, value: value)
            }
            try? open.close()
            fd = nil
        }
        guard let opened = try? FileDescriptor.open(root.appending(StoreGeneration.fileName), .readOnly,
                                                    options: [.noFollow, .closeOnExec]) else { return nil }
        fd = opened
        openings &+= 1
        return (try? StoreGeneration.read(opened)).flatMap { $0.map { GenerationStamp(opening: openings, value: $0) } }
    }
}
