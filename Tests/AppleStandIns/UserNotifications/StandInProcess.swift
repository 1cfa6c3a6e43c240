// Stand-in only: the rules iOS runs a notification service extension by, which Linux's kernel does not
// enforce, so that tests catch code that would work here and fail on a phone:
//
// - **One process, several instances, requests in parallel** (`StandInExtensionProcess`): iOS keeps one
//   extension process per app and may hand it several requests at once, on one instance or on several.
// - **Expiry per instance**: `serviceExtensionTimeWillExpire()` is called on the instance whose request ran out.
// - **Suspension**: once the content handler of the last request in flight was called, iOS may suspend the
//   process at once. A later file lock, write or fsync (a suspended process holding a lock on a file in a shared
//   container is killed, `0xdead10cc`) or `UNUserNotificationCenter.add` is recorded as a violation.
// - **Data protection by lock state** (`StandInDevice`): class A (`complete`) files cannot be read or created
//   while the phone is locked, class C (`completeUntilFirstUserAuthentication`) not before the first unlock; a
//   file made without a class takes its directory's, else the app's default (`default-data-protection`).
// - **`UserDefaults` before the first unlock** reads as empty: tests hand the code an empty suite then.
// - **The filtering entitlement**: content with no alert text is suppressed only when it is
//   `UNNotificationContent()` with nothing in it; anything else handed for a message meant to be suppressed is
//   a violation.
//
// The rules apply to code running under `StandInDevice.$current` (a task-local the process binds around each
// call it makes, inherited by the tasks the extension starts), so suites running in parallel do not see each
// other's phones. SealedPushApple reaches the device through `StandInDevice.current` in `#if os(Linux)` blocks
// only (the stand-in build): on Apple platforms the kernel enforces the same rules.
#if os(Linux)
public import Foundation
import Synchronization

/// Stand-in only: one simulated phone's lock state, data protection classes, suspension and violations.
public final class StandInDevice: Sendable {
    /// The phone's lock state.
    public enum LockState: Sendable, Equatable {
        /// Started and not unlocked since: only class D (`none`) files open.
        case beforeFirstUnlock
        /// Unlocked: every class opens.
        case unlocked
        /// Locked after a first unlock: classes B, C and D open; class A does not.
        case locked
    }

    /// A file operation the rules judge.
    public enum FileOperation: String, Sendable {
        /// Opening to read.
        case read
        /// Creating a file or directory.
        case create
        /// Writing bytes.
        case write
        /// Taking a `flock`.
        case lock
        /// `fsync` / `F_FULLFSYNC`.
        case fsync
        /// Renaming over a file.
        case rename
    }

    /// The device the running code belongs to (`nil`: no rules, as for code outside an extension process).
    @TaskLocal public static var current: StandInDevice?

    private struct State {
        var lock: LockState = .unlocked
        var defaultProtection: FileProtectionType = .completeUntilFirstUserAuthentication
        var classes: [String: FileProtectionType] = [:]
        var suspended = false
        var violations: [String] = []
    }
    private let state = Mutex(State())

    /// A phone, unlocked, whose app's default class is `defaultProtection` (iOS: C unless the
    /// `com.apple.developer.default-data-protection` entitlement says otherwise).
    public init(lock: LockState = .unlocked, defaultProtection: FileProtectionType = .completeUntilFirstUserAuthentication) {
        state.withLock {
            $0.lock = lock
            $0.defaultProtection = defaultProtection
        }
    }

    /// The lock state.
    public var lockState: LockState {
        get { state.withLock { $0.lock } }
        set { state.withLock { $0.lock = newValue } }
    }

    /// Whether the process is suspended (its last request's content handler was called).
    public var isSuspended: Bool { state.withLock { $0.suspended } }
    /// Suspends the process (iOS may, once no request is in flight).
    public func suspend() { state.withLock { $0.suspended = true } }
    /// Resumes it (a new request arrived).
    public func resume() { state.withLock { $0.suspended = false } }

    /// What broke a rule, in order.
    public var violations: [String] { state.withLock { $0.violations } }
    /// Records a broken rule.
    public func violation(_ what: String) { state.withLock { $0.violations.append(what) } }

    /// Records the class a file or directory was given (explicitly, at creation or by `setAttributes`).
    public func setProtection(_ protection: FileProtectionType, path: String) {
        state.withLock { $0.classes[Self.normalized(path)] = protection }
    }

    /// The class `path` has: its own, else the nearest directory's above it, else the app's default.
    public func protection(of path: String) -> FileProtectionType {
        state.withLock { s in
            var p = Self.normalized(path)
            while true {
                if let c = s.classes[p] { return c }
                guard let slash = p.lastIndex(of: "/"), p != "/" else { return s.defaultProtection }
                p = slash == p.startIndex ? "/" : String(p[..<slash])
            }
        }
    }

    /// Whether a file of `protection` opens in the current lock state.
    public func opens(_ protection: FileProtectionType) -> Bool {
        let lock = lockState
        switch protection.rawValue {
        case FileProtectionType.none.rawValue: return true
        case FileProtectionType.complete.rawValue: return lock == .unlocked
        default: return lock != .beforeFirstUnlock   // C (and B, for reading, once unlocked once)
        }
    }

    /// The `errno` iOS answers `operation` on `path` with in this state (`nil`: allowed); a file operation that
    /// changes state or takes a lock while the process is suspended is recorded as a violation.
    public func refusal(_ operation: FileOperation, path: String, creating newClass: FileProtectionType? = nil) -> Int32? {
        if operation != .read, isSuspended {
            violation("\(operation.rawValue) on \((path as NSString).lastPathComponent) after the content handler was called (process suspended)")
        }
        switch operation {
        case .read, .write:
            return opens(protection(of: path)) ? nil : EPERM
        case .create:
            return opens(newClass ?? protection(of: (path as NSString).deletingLastPathComponent)) ? nil : EPERM
        case .lock, .fsync, .rename:
            return nil
        }
    }

    private static func normalized(_ path: String) -> String {
        var p = path
        while p.count > 1, p.hasSuffix("/") { p.removeLast() }
        return p
    }
}

/// Stand-in only: what a content handler received, as a Sendable snapshot.
public struct StandInDelivered: Sendable, Equatable {
    /// The text, thread and category.
    public var title, subtitle, body, thread, category: String
    /// The badge.
    public var badge: Int?
    /// Whether a sound is set.
    public var hasSound: Bool
    /// The interruption level.
    public var interruptionLevel: UNNotificationInterruptionLevel
    /// The userInfo keys, sorted.
    public var userInfoKeys: [String]
    /// The userInfo as text (to look for strings in it).
    public var userInfoText: String
    /// The attachments' file paths.
    public var attachmentFiles: [String]
    /// Whether the content is `UNNotificationContent()` with nothing set.
    public var isEmpty: Bool
    /// Whether any alert text is set.
    public var hasAlertText: Bool { !(title.isEmpty && subtitle.isEmpty && body.isEmpty) }

    /// A snapshot of `c`.
    public init(_ c: UNNotificationContent) {
        title = c.title; subtitle = c.subtitle; body = c.body; thread = c.threadIdentifier; category = c.categoryIdentifier
        badge = c.badge?.intValue
        hasSound = c.sound != nil
        interruptionLevel = c.interruptionLevel
        userInfoKeys = c.userInfo.keys.compactMap { $0.base as? String }.sorted()
        userInfoText = "\(c.userInfo)"
        attachmentFiles = c.attachments.map(\.url.path)
        isEmpty = c.title.isEmpty && c.subtitle.isEmpty && c.body.isEmpty && c.badge == nil && c.sound == nil && c.threadIdentifier.isEmpty
            && c.categoryIdentifier.isEmpty && c.userInfo.isEmpty && c.attachments.isEmpty && c.launchImageName.isEmpty
            && c.targetContentIdentifier == nil
    }
}

/// Stand-in only: one extension process as iOS runs it: instances made on demand with `makeInstance`, each request
/// handed to the instance a test names on a thread of its own, expiry per instance, suspension once no request is
/// in flight, and the filtering entitlement's rule.
///
/// `@unchecked Sendable`: the instances are Apple classes (not Sendable); they are made and kept under `state`'s
/// lock, and iOS itself calls them from any thread, which the extension must allow.
public final class StandInExtensionProcess: @unchecked Sendable {
    /// The phone the process runs on.
    public let device: StandInDevice
    /// Whether the app has `com.apple.developer.usernotifications.filtering`.
    public let filteringEntitlement: Bool
    private let makeInstance: () -> UNNotificationServiceExtension
    private struct State {
        var instances: [Int: UNNotificationServiceExtension] = [:]
        var inFlight: [String: Int] = [:]
        var delivered: [String: [StandInDelivered]] = [:]
    }
    private let state = Mutex(State())

    /// A process on `device`; `makeInstance` is the principal class's `init()`.
    public init(device: StandInDevice, filteringEntitlement: Bool = false, makeInstance: @escaping () -> UNNotificationServiceExtension) {
        self.device = device
        self.filteringEntitlement = filteringEntitlement
        self.makeInstance = makeInstance
    }

    /// The instance `index` (made on first use).
    public func instance(_ index: Int) -> UNNotificationServiceExtension {
        state.withLock { s in
            if let made = s.instances[index] { return made }
            let made = makeInstance()
            s.instances[index] = made
            return made
        }
    }

    /// Hands `request` to instance `index` (resuming a suspended process), as iOS does: `didReceive` on the calling
    /// task with the device bound, the content handler recording what it got.
    public func deliver(_ request: UNNotificationRequest, to index: Int = 0) {
        let service = instance(index)
        let identifier = request.identifier
        state.withLock { $0.inFlight[identifier] = index }
        device.resume()
        StandInDevice.$current.withValue(device) {
            service.didReceive(request) { [self] content in self.handled(identifier, content) }
        }
    }

    /// iOS's expiry for instance `index` (its requests ran out of time).
    public func expire(instance index: Int) {
        let service = instance(index)
        StandInDevice.$current.withValue(device) { service.serviceExtensionTimeWillExpire() }
    }

    private func handled(_ identifier: String, _ content: UNNotificationContent) {
        let got = StandInDelivered(content)
        if filteringEntitlement, !got.hasAlertText, !got.isEmpty {
            device.violation("content with no alert text but other members handed over with the filtering entitlement: "
                             + "iOS suppresses only UNNotificationContent()")
        }
        let idle = state.withLock { s -> Bool in
            s.delivered[identifier, default: []].append(got)
            s.inFlight[identifier] = nil
            return s.inFlight.isEmpty
        }
        // iOS may suspend the process the moment nothing is in flight.
        if idle { device.suspend() }
    }

    /// What each request's content handler got (a second call is recorded too: iOS ignores it).
    public var delivered: [String: [StandInDelivered]] { state.withLock { $0.delivered } }
    /// The identifiers still in flight.
    public var inFlight: [String] { state.withLock { Array($0.inFlight.keys) } }

    /// Waits (at most `seconds`, 60 by default) until `identifiers` all got content.
    public func wait(for identifiers: [String], seconds: Double = 60) async {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            let done = state.withLock { s in identifiers.allSatisfy { s.delivered[$0] != nil } }
            if done { return }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }
}
#endif
