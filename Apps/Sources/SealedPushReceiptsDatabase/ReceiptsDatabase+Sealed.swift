public import SealedPushSender

extension ReceiptsDatabase {
    /// Records the receipt `sealed` asks for (SHA-256 of its token, message id, issued-at, device key id) in
    /// the database at `path`, opening and closing it; nothing when the message asks for no receipt.
    ///
    /// A sender calls this before the payload leaves it: without the record the receipt could not be checked.
    public static func recordExpected(_ sealed: SealedNotification, path: String) async throws(ReceiptsDatabaseError) {
        guard let receipt = sealed.receipt else { return }
        try await withOpened(path: path) { database throws(ReceiptsDatabaseError) in
            try await database.recordExpected(messageID: sealed.messageID, token: receipt.token, issuedAt: sealed.issuedAt,
                                              keyID: sealed.keyID)
        }
    }
}
