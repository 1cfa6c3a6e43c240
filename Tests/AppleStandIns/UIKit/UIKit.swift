// Stand-ins for the UIKit declarations SealedPushApple uses, so its real source files type-check on Linux
// (module-aliased to `UIKit` in the Linux build only; empty elsewhere), after Apple's documentation
// (developer.apple.com/documentation/uikit): `UIViewController` is a main-actor class, and
// `UIApplication.protectedDataDidBecomeAvailableNotification` a notification name extensions may observe.
#if os(Linux)
public import Foundation

/// Stand-in: `UIView` (main actor): only what a content extension's view needs here.
@MainActor
open class UIView {
    /// The subviews, back to front.
    open private(set) var subviews: [UIView] = []
    /// A view.
    public init() {}
    /// Adds `view` on top of the subviews.
    open func addSubview(_ view: UIView) { subviews.append(view) }
}

/// Stand-in: `UILabel` (main actor).
@MainActor
open class UILabel: UIView {
    /// The text shown.
    open var text: String?
    /// The most lines (0: as many as needed).
    open var numberOfLines = 1
    /// A label.
    public override init() { super.init() }
}

/// Stand-in: `UIViewController` (main actor, not Sendable).
@MainActor
open class UIViewController {
    /// The controller's root view.
    open var view: UIView = UIView()
    /// Stand-in only: how often `viewDidDisappear(_:)` reached this class.
    public private(set) var standInDisappearances = 0
    /// The preferred size of the view.
    open var preferredContentSize = CGSize(width: 0, height: 0)

    /// A view controller.
    public init() {}

    /// Called after the view was removed from the view hierarchy.
    open func viewDidDisappear(_ animated: Bool) { standInDisappearances += 1 }
    /// Called after the view was loaded.
    open func viewDidLoad() {}
}

/// Stand-in: `UIApplication` (only its notification names; `shared` is unavailable in extensions).
@MainActor
open class UIApplication {
    /// Posted when protected files become available (the device was unlocked).
    public nonisolated static let protectedDataDidBecomeAvailableNotification = Notification.Name("UIApplicationProtectedDataDidBecomeAvailable")
    /// Posted shortly before protected files lock down.
    public nonisolated static let protectedDataWillBecomeUnavailableNotification = Notification.Name("UIApplicationProtectedDataWillBecomeUnavailable")
}
#endif
