#if canImport(UserNotifications)
public import Foundation
public import SealedPushCrypto
import SealedPushWire

/// The device's reveal *public* key in the app group container (reveal v1 revision 3 §9): what the service
/// extension seals pending-queue entries to before the first unlock, when no Keychain item can be read.
///
/// `reveal-public-key`, protection **`none`** (it must read before the first unlock, and it is a public key: it
/// opens nothing), 32 bytes, rewritten whole under its lock (`AppGroupFile`). The app writes it
/// (`SealedPushApp.didLaunch` does, from the Keychain's active reveal key); the extension only reads it.
public struct AppGroupRevealPublicKey: Sendable {
    /// The file's name.
    public static let fileName = "reveal-public-key"
    /// Its protection class.
    public static let fileProtection = AppGroupFileProtection.noProtection

    /// The directory holding the file.
    public let directory: URL
    let files: any AppGroupFileSystem

    /// The file in `directory`.
    public init(directory: URL) {
        self.init(directory: directory, files: SystemAppGroupFiles())
    }

    /// The file in `SealedPush` in the container of `groupIdentifier`; throws `containerUnavailable` without it.
    public init(appGroup groupIdentifier: String) throws(AppGroupStoreError) {
        let files = SystemAppGroupFiles()
        self.init(directory: try AppGroupContainer.directory(groupIdentifier: groupIdentifier, files: files), files: files)
    }

    init(directory: URL, files: any AppGroupFileSystem) {
        self.directory = directory
        self.files = files
    }

    var file: AppGroupFile {
        AppGroupFile(url: directory.appendingPathComponent(Self.fileName), protection: Self.fileProtection, files: files,
                     lockTimeout: .seconds(1))
    }

    /// The key, or `nil` when none was written (or the file is not 32 bytes).
    public func read() -> BoxPublicKey? {
        guard case let .bytes(bytes)? = try? file.read(maximumBytes: 64) else { return nil }
        return try? BoxPublicKey(bytes: bytes)
    }

    /// Writes `key` (nothing when it is already the one written).
    public func write(_ key: BoxPublicKey) throws(AppGroupStoreError) {
        guard read() != key else { return }
        try file.update(maximumBytes: 64) { (_) throws(AppGroupStoreError) -> (write: [UInt8]?, result: Void) in (key.bytes, ()) }
    }
}
#endif
