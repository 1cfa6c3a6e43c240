import SealedPushReceiptsDatabase
import SealedPushSender

/// `seal --receipts-db` and `send --receipts-db`: records the expected receipt (SHA-256 of the token,
/// message id, issued-at, device key id) before the payload is printed or sent.
enum ReceiptsRecording {
    /// Records `sealed`'s expected receipt in the database at `path` (nothing when it asks for none).
    package static func record(_ sealed: SealedNotification, database path: String) async throws {
        do { try await ReceiptsDatabase.recordExpected(sealed, path: path) } catch {
            throw CLIError("\(error); the payload was not printed (without the record its receipt could not be checked)")
        }
    }
}
