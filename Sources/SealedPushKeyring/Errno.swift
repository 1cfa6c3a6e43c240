#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `strerror` text for an errno value.
package func errnoText(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "errno \(code)" }
    return String(cString: text)
}

/// The symbolic name of the errno values the store explains (`EACCES`, `ENOSPC`, …), else `errno N`.
package func errnoName(_ code: Int32) -> String {
    switch code {
    case EACCES: return "EACCES"
    case EPERM: return "EPERM"
    case EROFS: return "EROFS"
    case ENOSPC: return "ENOSPC"
    case EDQUOT: return "EDQUOT"
    case EFBIG: return "EFBIG"
    case EIO: return "EIO"
    case ENOENT: return "ENOENT"
    case EMFILE: return "EMFILE"
    case ENFILE: return "ENFILE"
    default: return "errno \(code)"
    }
}

/// What to do about a failed file-system operation, by its errno: the second half of `KeychainError.io`'s message.
package func ioAdvice(_ code: Int32) -> String {
    switch code {
    case EACCES, EPERM:
        return "this process may not write there: the store's directories must be writable by their owner (chmod 700) "
            + "and its files readable and writable (chmod 600), and the process must run as that owner"
    case EROFS:
        return "the file system holding the store is mounted read-only; remount it read-write or move the store to a writable disk"
    case ENOSPC, EDQUOT:
        return "the disk (or this user's quota) is full; free some space and retry"
    case EFBIG:
        return "the file would exceed the largest file this process may write (the file size limit, `ulimit -f`, or a full "
            + "file system); raise the limit or free some space and retry"
    case EIO:
        return "the disk reported an I/O error; check the disk, and restore the store from a backup if items no longer read"
    case ENOENT:
        return "part of the store is missing; check the store path, or re-create the store"
    case EMFILE, ENFILE:
        return "too many files are open; close some or raise the limit (`ulimit -n`) and retry"
    default:
        return "check that the directory exists, is yours, and the disk is writable"
    }
}

