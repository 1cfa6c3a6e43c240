public import SealedPushReceiver
import Dispatch

/// An extension that stalls before it starts work — a slow network, a lock held elsewhere — for the
/// simulator's `--extension-delay`.
///
/// It holds `didReceive` back for `delay`, or until the expiry callback comes, whichever is first;
/// the expiry callback reaches the wrapped extension first, so a stall past the time limit shows the
/// wrapped extension's timeout content, as a stall inside a real extension would.
public final class StalledExtension: ReportingServiceExtension {
    private let wrapped: any ReportingServiceExtension
    private let delay: Duration?
    private let expired = DispatchSemaphore(value: 0)

    /// Wraps `wrapped`, stalling each request by `delay` (`nil`: until the expiry callback).
    public init(_ wrapped: any ReportingServiceExtension, delay: Duration?) {
        self.wrapped = wrapped
        self.delay = delay
    }

    /// Waits out the stall (on the caller's thread, as a blocked extension would), then forwards.
    public func didReceive(_ request: NotificationRequest, resultHandler: @escaping @Sendable (ExtensionDelivery) -> Void) {
        if let delay {
            let c = delay.components
            let nanoseconds = c.seconds.multipliedReportingOverflow(by: 1_000_000_000)
            let total = nanoseconds.overflow ? Int64.max : nanoseconds.partialValue.addingReportingOverflow(c.attoseconds / 1_000_000_000).partialValue
            _ = expired.wait(timeout: .now() + .nanoseconds(Int(clamping: total)))
        } else {
            expired.wait()
        }
        wrapped.didReceive(request, resultHandler: resultHandler)
    }

    /// Forwards the expiry callback, then ends the stall.
    public func serviceExtensionTimeWillExpire() {
        wrapped.serviceExtensionTimeWillExpire()
        expired.signal()
    }
}
