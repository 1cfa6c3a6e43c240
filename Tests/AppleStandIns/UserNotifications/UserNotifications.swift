// Stand-ins for the UserNotifications declarations SealedPushApple uses, so its real source files
// type-check on Linux (module-aliased to `UserNotifications` in the Linux build only; empty elsewhere).
// Names, signatures, optionality, `@escaping` and Sendable-ness follow Apple's documentation
// (developer.apple.com/documentation/usernotifications). Apple's classes are Objective-C classes
// that are not declared Sendable here: the strictest reading, so code that compiles against these
// also compiles if the SDK marks some of them Sendable. Behaviour is the minimum the tests need.
#if os(Linux)
public import Foundation
import Synchronization

/// Stand-in: `UNNotificationInterruptionLevel` (iOS 15+).
public enum UNNotificationInterruptionLevel: UInt, Sendable {
    /// The system adds the notification to the list without lighting the screen or playing a sound.
    case passive = 0
    /// The system presents the notification immediately.
    case active = 1
    /// The system presents it immediately, can break through Focus.
    case timeSensitive = 2
    /// The system presents it immediately, ignoring the mute switch.
    case critical = 3
}

/// Stand-in: `UNNotificationSoundName`.
public struct UNNotificationSoundName: Hashable, RawRepresentable, Sendable {
    /// The sound file's name.
    public let rawValue: String
    /// A name from its raw value.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A name from its raw value.
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

/// Stand-in: `UNNotificationSound` (not Sendable).
open class UNNotificationSound: NSObject {
    /// Stand-in only: the file name, `nil` for the default sound.
    public let standInName: String?
    /// Stand-in only: whether it is a critical alert sound.
    public let standInCritical: Bool

    init(name: String?, critical: Bool) {
        standInName = name
        standInCritical = critical
    }

    /// The default sound.
    open class var `default`: UNNotificationSound { UNNotificationSound(name: nil, critical: false) }
    /// The default critical alert sound.
    open class var defaultCritical: UNNotificationSound { UNNotificationSound(name: nil, critical: true) }
    /// A sound from a file in the app's bundle or Library/Sounds.
    public convenience init(named name: UNNotificationSoundName) { self.init(name: name.rawValue, critical: false) }
    /// A critical alert sound from a file.
    open class func criticalSoundNamed(_ name: UNNotificationSoundName) -> UNNotificationSound {
        UNNotificationSound(name: name.rawValue, critical: true)
    }
}

/// Stand-in: `UNNotificationAttachmentOptionsTypeHintKey` (a UTI string such as `public.jpeg`).
public let UNNotificationAttachmentOptionsTypeHintKey: String = "UNNotificationAttachmentOptionsTypeHintKey"
/// Stand-in: `UNNotificationAttachmentOptionsThumbnailHiddenKey` (an NSNumber Boolean).
public let UNNotificationAttachmentOptionsThumbnailHiddenKey: String = "UNNotificationAttachmentOptionsThumbnailHiddenKey"
/// Stand-in: `UNNotificationAttachmentOptionsThumbnailTimeKey` (an NSNumber: seconds, or a frame).
public let UNNotificationAttachmentOptionsThumbnailTimeKey: String = "UNNotificationAttachmentOptionsThumbnailTimeKey"

/// Stand-in: `UNNotificationAttachment` (not Sendable).
open class UNNotificationAttachment: NSObject {
    /// The attachment's identifier.
    open private(set) var identifier: String = ""
    /// The file's URL.
    open private(set) var url: URL = URL(fileURLWithPath: "/")
    /// The file's UTI.
    open private(set) var type: String = ""
    /// Stand-in only: the options it was made with.
    public private(set) var standInOptions: [AnyHashable: Any]?

    /// Apple: `+attachmentWithIdentifier:URL:options:error:`; throws when the file is unreadable or of
    /// an unsupported type. The stand-in throws when `URL` is not an existing regular file.
    public convenience init(identifier: String, url URL: URL, options: [AnyHashable: Any]? = nil) throws {
        var isDirectory: ObjCBool = false
        guard URL.isFileURL, FileManager.default.fileExists(atPath: URL.path, isDirectory: &isDirectory), !isDirectory.boolValue else {
            throw NSError(domain: "UNErrorDomain", code: 100, userInfo: nil)   // UNError.attachmentInvalidURL
        }
        // iOS reads the file to validate it: a file whose protection class is not available in the lock state
        // cannot be attached (StandInProcess.swift).
        if let device = StandInDevice.current, !device.opens(device.protection(of: URL.path)) {
            device.violation("attachment \(URL.lastPathComponent) is of a protection class the locked phone cannot read")
            throw NSError(domain: "UNErrorDomain", code: 101, userInfo: nil)   // UNError.attachmentUnrecognizedType
        }
        self.init()
        self.identifier = identifier
        self.url = URL
        self.type = options?[UNNotificationAttachmentOptionsTypeHintKey] as? String ?? ""
        standInOptions = options
    }
}

/// Stand-in: `UNNotificationContent` (not Sendable). Apple's read-only properties; the mutable
/// subclass re-declares them settable.
open class UNNotificationContent: NSObject, NSCopying, NSMutableCopying {
    var storage = Storage()

    struct Storage {
        var title = "", subtitle = "", body = "", threadIdentifier = "", categoryIdentifier = "", launchImageName = ""
        var badge: NSNumber?
        var sound: UNNotificationSound?
        var userInfo: [AnyHashable: Any] = [:]
        var attachments: [UNNotificationAttachment] = []
        var interruptionLevel: UNNotificationInterruptionLevel = .active
        var relevanceScore: Double = 0
        var targetContentIdentifier: String?
        var filterCriteria: String?
    }

    /// Empty content.
    public override init() {}

    /// The localized title.
    open var title: String { storage.title }
    /// The localized subtitle.
    open var subtitle: String { storage.subtitle }
    /// The localized body.
    open var body: String { storage.body }
    /// The badge number, if any.
    open var badge: NSNumber? { storage.badge }
    /// The sound, if any.
    open var sound: UNNotificationSound? { storage.sound }
    /// The thread identifier.
    open var threadIdentifier: String { storage.threadIdentifier }
    /// The category identifier.
    open var categoryIdentifier: String { storage.categoryIdentifier }
    /// The launch image name.
    open var launchImageName: String { storage.launchImageName }
    /// The custom data of the payload.
    open var userInfo: [AnyHashable: Any] { storage.userInfo }
    /// Attached media.
    open var attachments: [UNNotificationAttachment] { storage.attachments }
    /// The interruption level (iOS 15+).
    open var interruptionLevel: UNNotificationInterruptionLevel { storage.interruptionLevel }
    /// The relevance score, 0 to 1 (iOS 15+).
    open var relevanceScore: Double { storage.relevanceScore }
    /// The target content identifier.
    open var targetContentIdentifier: String? { storage.targetContentIdentifier }
    /// The Focus filter criteria (iOS 16+).
    open var filterCriteria: String? { storage.filterCriteria }

    /// `NSCopying`: an immutable copy.
    open func copy(with zone: NSZone? = nil) -> Any {
        let copy = UNNotificationContent()
        copy.storage = storage
        return copy
    }

    /// `NSMutableCopying`: a `UNMutableNotificationContent` with the same values.
    open func mutableCopy(with zone: NSZone? = nil) -> Any {
        let copy = UNMutableNotificationContent()
        copy.storage = storage
        return copy
    }
}

/// Stand-in: `UNMutableNotificationContent` (not Sendable).
open class UNMutableNotificationContent: UNNotificationContent {
    /// Empty content.
    public override init() {}
    /// The title.
    open override var title: String { get { storage.title } set { storage.title = newValue } }
    /// The subtitle.
    open override var subtitle: String { get { storage.subtitle } set { storage.subtitle = newValue } }
    /// The body.
    open override var body: String { get { storage.body } set { storage.body = newValue } }
    /// The badge.
    open override var badge: NSNumber? { get { storage.badge } set { storage.badge = newValue } }
    /// The sound.
    open override var sound: UNNotificationSound? { get { storage.sound } set { storage.sound = newValue } }
    /// The thread identifier.
    open override var threadIdentifier: String { get { storage.threadIdentifier } set { storage.threadIdentifier = newValue } }
    /// The category identifier.
    open override var categoryIdentifier: String { get { storage.categoryIdentifier } set { storage.categoryIdentifier = newValue } }
    /// The launch image name.
    open override var launchImageName: String { get { storage.launchImageName } set { storage.launchImageName = newValue } }
    /// The custom data.
    open override var userInfo: [AnyHashable: Any] { get { storage.userInfo } set { storage.userInfo = newValue } }
    /// Attached media.
    open override var attachments: [UNNotificationAttachment] { get { storage.attachments } set { storage.attachments = newValue } }
    /// The interruption level.
    open override var interruptionLevel: UNNotificationInterruptionLevel {
        get { storage.interruptionLevel } set { storage.interruptionLevel = newValue }
    }
    /// The relevance score.
    open override var relevanceScore: Double { get { storage.relevanceScore } set { storage.relevanceScore = newValue } }
    /// The target content identifier.
    open override var targetContentIdentifier: String? {
        get { storage.targetContentIdentifier } set { storage.targetContentIdentifier = newValue }
    }
    /// The Focus filter criteria.
    open override var filterCriteria: String? { get { storage.filterCriteria } set { storage.filterCriteria = newValue } }
}

/// Stand-in: `UNNotificationTrigger` (not Sendable).
open class UNNotificationTrigger: NSObject {}

/// Stand-in: `UNNotificationRequest` (not Sendable).
open class UNNotificationRequest: NSObject {
    /// The request identifier.
    open private(set) var identifier: String = ""
    /// The content (Apple: `@NSCopying`).
    open private(set) var content: UNNotificationContent = UNNotificationContent()
    /// The trigger, `nil` for a push.
    open private(set) var trigger: UNNotificationTrigger?

    /// A request from its identifier, content and trigger.
    public convenience init(identifier: String, content: UNNotificationContent, trigger: UNNotificationTrigger?) {
        self.init()
        self.identifier = identifier
        self.content = content.copy() as! UNNotificationContent
        self.trigger = trigger
    }
}

/// Stand-in: `UNNotificationServiceExtension` (not Sendable, no actor isolation).
open class UNNotificationServiceExtension: NSObject {
    /// The system creates the principal class with `init()`.
    public override init() {}
    /// Asks the extension to modify the content; call `contentHandler` once with the result.
    open func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        contentHandler(request.content)
    }
    /// Time is nearly up: deliver the best attempt now.
    open func serviceExtensionTimeWillExpire() {}
}
#endif

#if os(Linux)
/// Stand-in: `UNNotification` (not Sendable): a delivered notification, its request and delivery date.
open class UNNotification: NSObject {
    /// When it was delivered.
    open private(set) var date: Date = Date(timeIntervalSince1970: 0)
    /// The request it came from.
    open private(set) var request: UNNotificationRequest = UNNotificationRequest()

    /// Stand-in only: a delivered notification (iOS makes these; apps do not).
    public convenience init(standInRequest request: UNNotificationRequest, date: Date) {
        self.init()
        self.request = request
        self.date = date
    }
}
#endif

#if os(Linux)
/// Stand-in: `UNUserNotificationCenter` (not Sendable): the app's notifications in Notification Center. Only the
/// methods SealedPushApple calls, with Apple's completion-handler signatures; the stand-in keeps the delivered
/// requests in memory (`standInDelivered`) so tests can see what was added and replaced.
open class UNUserNotificationCenter: NSObject {
    /// `nonisolated(unsafe)`: a stand-in singleton made once; its only state is behind a `Mutex`.
    nonisolated(unsafe) private static let shared = UNUserNotificationCenter()
    /// The delivered requests, guarded by `lock` (the center is used from any thread, as Apple's is).
    private var deliveredRequests: [(identifier: String, request: UNNotificationRequest, date: Date)] = []
    private let lock = NSLock()

    /// The app's notification center.
    open class func current() -> UNUserNotificationCenter { shared }

    /// Fetches the app's delivered notifications still in Notification Center (the handler may run on a background thread).
    open func getDeliveredNotifications(completionHandler: @escaping @Sendable ([UNNotification]) -> Void) {
        let list = lock.withLock { deliveredRequests.map { UNNotification(standInRequest: $0.request, date: $0.date) } }
        completionHandler(list)
    }

    /// Schedules `request`; a request with the identifier of a delivered notification replaces it.
    open func add(_ request: UNNotificationRequest, withCompletionHandler completionHandler: (@Sendable ((any Error)?) -> Void)? = nil) {
        if let device = StandInDevice.current, device.isSuspended {
            device.violation("UNUserNotificationCenter.add after the content handler was called (process suspended)")
        }
        lock.withLock {
            deliveredRequests.removeAll { $0.identifier == request.identifier }
            deliveredRequests.append((request.identifier, request, Date()))
        }
        completionHandler?(nil)
    }

    /// Removes the delivered notifications with these identifiers.
    open func removeDeliveredNotifications(withIdentifiers identifiers: [String]) {
        lock.withLock { deliveredRequests.removeAll { identifiers.contains($0.identifier) } }
    }

    /// Stand-in only: what Notification Center holds (oldest first).
    public var standInDelivered: [UNNotificationRequest] { lock.withLock { deliveredRequests.map(\.request) } }
    /// Stand-in only: empties Notification Center.
    public func standInReset() { lock.withLock { deliveredRequests.removeAll() } }
}
#endif
