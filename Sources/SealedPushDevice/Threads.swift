import Dispatch

/// Runs `body` off the caller's thread, as iOS runs extension callbacks on threads of its own. A
/// blocking extension (a stalled network call, a held lock) then never blocks Swift's cooperative pool.
func runOffPool(_ body: @escaping @Sendable () -> Void) {
    DispatchQueue.global(qos: .userInitiated).async(execute: body)
}
