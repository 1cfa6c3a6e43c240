import Foundation

/// Runs `body` on a new thread, as iOS runs extension callbacks off the caller's thread. A blocking
/// extension (a stalled network call, a held lock) then never blocks Swift's cooperative pool.
func runOnThread(_ body: @escaping @Sendable () -> Void) {
    let thread = Thread { body() }
    thread.stackSize = 1 << 20
    thread.start()
}
