#if canImport(UserNotifications)
import Foundation
#if os(Linux)
import UserNotifications   // the stand-ins' StandInDevice: the rules iOS's kernel enforces (Tests/AppleStandIns)
#endif

/// The file rules of the phone the code runs on: which files open in the lock state, and what a suspended process
/// may not do.
///
/// On iOS the kernel enforces them and every check here is a no-op; the one call with an effect is
/// `setProtection`, which gives a file or directory its data protection class explicitly. In the Linux build
/// (against the stand-ins) the checks ask the stand-in device, so tests see what a phone would refuse.
enum DataProtection {
    /// What a store is about to do to a file.
    enum Operation: String {
        case read, create, write, lock, fsync, rename
    }

    /// Throws what iOS would answer `operation` on `path` with in the phone's current state (the stand-in device in
    /// the Linux build; nothing on iOS, where the system call itself answers).
    static func check(_ operation: Operation, _ path: String, creating protection: AppGroupFileProtection? = nil) throws(AppGroupStoreError) {
        #if os(Linux)
        guard let device = StandInDevice.current,
              let kind = StandInDevice.FileOperation(rawValue: operation.rawValue) else { return }
        if let code = device.refusal(kind, path: path, creating: protection?.fileProtectionType) {
            throw .posix(code, operation: operation.rawValue, file: (path as NSString).lastPathComponent)
        }
        #endif
    }

    /// Gives `path` the class `protection` explicitly (`FileAttributeKey.protectionKey`); new files in a directory
    /// take the directory's class. `false` when the system refused.
    @discardableResult
    static func setProtection(_ protection: AppGroupFileProtection, path: String) -> Bool {
        #if os(Linux)
        // swift-corelibs-foundation has no data protection; the stand-in device records the class instead.
        StandInDevice.current?.setProtection(protection.fileProtectionType, path: path)
        return true
        #else
        do {
            try FileManager.default.setAttributes([.protectionKey: protection.fileProtectionType], ofItemAtPath: path)
            return true
        } catch {
            return false
        }
        #endif
    }

    /// Records the class a file was created with (Foundation applied it at `open`); the stand-in device's record.
    static func created(_ path: String, protection: AppGroupFileProtection) {
        #if os(Linux)
        StandInDevice.current?.setProtection(protection.fileProtectionType, path: path)
        #endif
    }
}
#endif
