// The device's receipt transport: HTTP over AsyncHTTPClient, shut down after each command.
import SealedPushDeviceHTTP
package import SealedPushReceiver

package enum ReceiptsTransportCLI {
    /// Runs `body` with the HTTP transport, shutting its client down afterwards.
    package static func with<R>(_ body: ((any ReceiptTransport)?) async throws -> R) async rethrows -> R {
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
