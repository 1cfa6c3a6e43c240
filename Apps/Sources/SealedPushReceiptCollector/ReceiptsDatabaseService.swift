public import SealedPushReceiptsDatabase
public import ServiceLifecycle

/// The receipts database as a swift-service-lifecycle `Service`: it does nothing until graceful shutdown
/// (or cancellation), then closes the database and returns.
///
/// List it before the collector's application in a `ServiceGroup`: the group shuts services down in reverse
/// order, so the HTTP server has stopped answering before the database closes.
public struct ReceiptsDatabaseService: Service {
    /// The database closed on shutdown.
    public let database: ReceiptsDatabase

    /// A service closing `database` on shutdown.
    public init(database: ReceiptsDatabase) { self.database = database }

    /// Waits for graceful shutdown or cancellation, then closes the database.
    public func run() async throws {
        try? await gracefulShutdown()
        await database.close()
    }
}
