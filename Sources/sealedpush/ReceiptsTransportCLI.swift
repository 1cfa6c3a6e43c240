// The device's receipt transport: HTTP in builds with the networking modules; without them
// (SEALEDPUSH_CORE_ONLY) receipts and failure reports are queued in the outbox.
#if canImport(SealedPushReceiptsHTTP)
import SealedPushReceiptsHTTP
import SealedPushReceiver

enum ReceiptsTransportCLI {
    /// Runs `body` with the HTTP transport, shutting its client down afterwards.
    static func with<R>(_ body: ((any ReceiptTransport)?) async throws -> R) async rethrows -> R {
        let transport = HTTPReceiptTransport()
        do {
            let result = try await body(transport)
            await transport.shutdown()
            return result
        } catch {
            await transport.shutdown()
            throw error
        }
    }
}
#else
import SealedPushReceiver

enum ReceiptsTransportCLI {
    /// This build has no networking: `body` gets no transport, so receipts and reports are queued.
    static func with<R>(_ body: ((any ReceiptTransport)?) async throws -> R) async rethrows -> R {
        try await body(nil)
    }
}
#endif
