#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a directory cannot hold private files (decrypted attachments).
public enum PrivateDirectoryProblem: Error, Sendable, Equatable {
    /// It does not exist and could not be created, or cannot be examined (`errno`).
    case unusable(errno: Int32)
    /// The path is a symbolic link (never followed for a private directory).
    case symbolicLink
    /// The path is not a directory.
    case notDirectory
    /// Another user owns the directory (`owner`), not the one running this process.
    case notOwner(owner: UInt32)
    /// Group or others have some access (`mode`: the permission bits).
    case accessibleByOthers(mode: UInt32)
}

/// One entry of a directory listing, examined with `lstat` (a symbolic link is never followed).
public struct DirectoryEntry: Sendable, Equatable {
    /// The entry's name (no `/`).
    public let name: String
    /// Whether it is a regular file (not a link, a directory, a FIFO…).
    public let isRegularFile: Bool
    /// Its modification time, in seconds since 1970.
    public let modified: Int64
}

/// Directories that hold files nobody else may read or replace, and the few file-system calls around them,
/// without Foundation (which the extension modules do not link).
public enum PrivateDirectory {
    /// Checks that `path` is a private directory: not a symbolic link (`lstat`), a directory, owned by this
    /// process's user, without group or other access (`chmod 700`). When it does not exist and `create` is
    /// set, makes it (`mkdir` of the last component only, mode `0700`) and checks the result.
    public static func prepare(_ path: String, create: Bool) throws(PrivateDirectoryProblem) {
        var p = path
        while p.count > 1, p.hasSuffix("/") { p.removeLast() }   // "dir/" would make lstat follow a link
        var info = stat()
        if lstat(p, &info) != 0 {
            let code = errno
            guard code == ENOENT, create else { throw .unusable(errno: code) }
            if mkdir(p, 0o700) != 0, errno != EEXIST { throw .unusable(errno: errno) }
            guard lstat(p, &info) == 0 else { throw .unusable(errno: errno) }
        }
        let kind = UInt32(info.st_mode) & UInt32(S_IFMT)
        guard kind != UInt32(S_IFLNK) else { throw .symbolicLink }
        guard kind == UInt32(S_IFDIR) else { throw .notDirectory }
        guard UInt32(info.st_uid) == UInt32(geteuid()) else { throw .notOwner(owner: UInt32(info.st_uid)) }
        let mode = UInt32(info.st_mode) & 0o7777
        guard mode & 0o077 == 0 else { throw .accessibleByOthers(mode: mode) }
    }

    /// The entries of `path` other than `.` and `..`, each examined with `lstat`; entries that vanish while
    /// listed are left out.
    public static func entries(of path: String) throws(PrivateDirectoryProblem) -> [DirectoryEntry] {
        guard let dir = opendir(path) else { throw .unusable(errno: errno) }
        defer { closedir(dir) }
        let base = path.hasSuffix("/") ? path : path + "/"
        var out: [DirectoryEntry] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: entry.pointee.d_name)) { String(cString: $0) }
            }
            guard name != ".", name != ".." else { continue }
            var info = stat()
            guard lstat(base + name, &info) == 0 else { continue }
            #if canImport(Darwin)
            let modified = Int64(info.st_mtimespec.tv_sec)
            #else
            let modified = Int64(info.st_mtim.tv_sec)
            #endif
            out.append(DirectoryEntry(name: name, isRegularFile: UInt32(info.st_mode) & UInt32(S_IFMT) == UInt32(S_IFREG), modified: modified))
        }
        return out
    }

    /// Removes the file (never a directory) at `path`; whether it was removed.
    @discardableResult
    public static func removeFile(_ path: String) -> Bool { unlink(path) == 0 }

    /// The wall clock, in seconds since 1970 (the clock file modification times are in).
    public static func currentTime() -> Int64 { Int64(time(nil)) }

    /// `path` with every symbolic link resolved and `.`/`..` removed (`realpath`); `errno` when it cannot be resolved.
    public static func realPath(_ path: String) throws(PrivateDirectoryProblem) -> String {
        guard let resolved = realpath(path, nil) else { throw .unusable(errno: errno) }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The system's text for `errno` `code`.
    public static func describe(errno code: Int32) -> String { String(cString: strerror(code)) }
}
