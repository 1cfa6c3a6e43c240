// Stand-ins for the UIKit declarations SealedPushApple uses, so its real source files type-check on Linux
// (module-aliased to `UIKit` in the Linux build only; empty elsewhere), after Apple's documentation
// (developer.apple.com/documentation/uikit): `UIViewController` is a main-actor class,
// `UIApplication.protectedDataDidBecomeAvailableNotification` a notification name extensions may observe,
// and the Auto Layout API a view's subviews are placed with (`translatesAutoresizingMaskIntoConstraints`,
// `layoutMarginsGuide`, `safeAreaLayoutGuide`, the anchors, `NSLayoutAnchor<AnchorType>`'s
// `constraint(equalTo:)` family, `NSLayoutConstraint.activate(_:)`), all main-actor classes. Classes above
// the declared ones (`NSObject`, `UIResponder`) are left out. The stand-in lays nothing out: a constraint
// keeps its items, attributes and relation, and activating it records it on its first item's view.
#if os(Linux)
public import Foundation

/// Stand-in: `UIView` (main actor): only what a content extension's view needs here.
@MainActor
open class UIView {
    /// The subviews, back to front.
    open private(set) var subviews: [UIView] = []
    /// The view this one is a subview of.
    open private(set) weak var superview: UIView?
    /// Whether the autoresizing mask becomes constraints (`true` until a view is placed with constraints).
    open var translatesAutoresizingMaskIntoConstraints = true
    /// Stand-in only: the active constraints whose first item is this view (or one of its guides).
    public internal(set) var standInConstraints: [NSLayoutConstraint] = []
    /// A view.
    public init() {}
    /// Adds `view` on top of the subviews.
    open func addSubview(_ view: UIView) {
        subviews.append(view)
        view.superview = self
    }

    /// The view's margins as a layout guide.
    open var layoutMarginsGuide: UILayoutGuide { marginsGuide }
    /// The area not covered by bars and other content, as a layout guide.
    open var safeAreaLayoutGuide: UILayoutGuide { safeAreaGuide }
    private lazy var marginsGuide = UILayoutGuide(standInOwningView: self, standInName: "layoutMarginsGuide")
    private lazy var safeAreaGuide = UILayoutGuide(standInOwningView: self, standInName: "safeAreaLayoutGuide")

    /// The leading edge.
    open var leadingAnchor: NSLayoutXAxisAnchor { NSLayoutXAxisAnchor(item: self, attribute: .leading) }
    /// The trailing edge.
    open var trailingAnchor: NSLayoutXAxisAnchor { NSLayoutXAxisAnchor(item: self, attribute: .trailing) }
    /// The top edge.
    open var topAnchor: NSLayoutYAxisAnchor { NSLayoutYAxisAnchor(item: self, attribute: .top) }
    /// The bottom edge.
    open var bottomAnchor: NSLayoutYAxisAnchor { NSLayoutYAxisAnchor(item: self, attribute: .bottom) }
}

/// Stand-in: `UILayoutGuide` (main actor): a rectangle in its owning view that constraints can refer to.
@MainActor
open class UILayoutGuide {
    /// The view that owns the guide.
    open private(set) weak var owningView: UIView?
    /// Stand-in only: which guide of its view this is (`layoutMarginsGuide`, `safeAreaLayoutGuide`).
    public let standInName: String
    init(standInOwningView: UIView, standInName: String) {
        owningView = standInOwningView
        self.standInName = standInName
    }
    /// The leading edge.
    open var leadingAnchor: NSLayoutXAxisAnchor { NSLayoutXAxisAnchor(item: self, attribute: .leading) }
    /// The trailing edge.
    open var trailingAnchor: NSLayoutXAxisAnchor { NSLayoutXAxisAnchor(item: self, attribute: .trailing) }
    /// The top edge.
    open var topAnchor: NSLayoutYAxisAnchor { NSLayoutYAxisAnchor(item: self, attribute: .top) }
    /// The bottom edge.
    open var bottomAnchor: NSLayoutYAxisAnchor { NSLayoutYAxisAnchor(item: self, attribute: .bottom) }
}

/// Stand-in: `NSLayoutAnchor<AnchorType>` (main actor): makes constraints between two anchors of one axis.
@MainActor
open class NSLayoutAnchor<AnchorType> where AnchorType: AnyObject {
    let item: AnyObject
    let attribute: NSLayoutConstraint.Attribute
    init(item: AnyObject, attribute: NSLayoutConstraint.Attribute) {
        self.item = item
        self.attribute = attribute
    }
    /// A constraint: this anchor equals `anchor`.
    open func constraint(equalTo anchor: NSLayoutAnchor<AnchorType>) -> NSLayoutConstraint { make(.equal, anchor, 0) }
    /// A constraint: this anchor is at least `anchor`.
    open func constraint(greaterThanOrEqualTo anchor: NSLayoutAnchor<AnchorType>) -> NSLayoutConstraint { make(.greaterThanOrEqual, anchor, 0) }
    /// A constraint: this anchor is at most `anchor`.
    open func constraint(lessThanOrEqualTo anchor: NSLayoutAnchor<AnchorType>) -> NSLayoutConstraint { make(.lessThanOrEqual, anchor, 0) }
    /// A constraint: this anchor equals `anchor` plus `c`.
    open func constraint(equalTo anchor: NSLayoutAnchor<AnchorType>, constant c: CGFloat) -> NSLayoutConstraint { make(.equal, anchor, c) }

    private func make(_ relation: NSLayoutConstraint.Relation, _ other: NSLayoutAnchor<AnchorType>, _ constant: CGFloat) -> NSLayoutConstraint {
        NSLayoutConstraint(firstItem: item, firstAttribute: attribute, relation: relation, secondItem: other.item, secondAttribute: other.attribute,
                           constant: constant)
    }
}

/// Stand-in: `NSLayoutXAxisAnchor` (leading, trailing, centre X).
@MainActor
open class NSLayoutXAxisAnchor: NSLayoutAnchor<NSLayoutXAxisAnchor> {}

/// Stand-in: `NSLayoutYAxisAnchor` (top, bottom, centre Y).
@MainActor
open class NSLayoutYAxisAnchor: NSLayoutAnchor<NSLayoutYAxisAnchor> {}

/// Stand-in: `NSLayoutConstraint` (main actor): one relation between two layout attributes.
@MainActor
open class NSLayoutConstraint {
    /// Stand-in: `NSLayoutConstraint.Attribute` (Apple's raw values).
    public enum Attribute: Int, Sendable {
        /// No attribute.
        case notAnAttribute = 0
        /// The left edge.
        case left = 1
        /// The right edge.
        case right = 2
        /// The top edge.
        case top = 3
        /// The bottom edge.
        case bottom = 4
        /// The leading edge.
        case leading = 5
        /// The trailing edge.
        case trailing = 6
    }
    /// Stand-in: `NSLayoutConstraint.Relation` (Apple's raw values).
    public enum Relation: Int, Sendable {
        /// At most.
        case lessThanOrEqual = -1
        /// Equal.
        case equal = 0
        /// At least.
        case greaterThanOrEqual = 1
    }

    /// The first item of the relation (not retained: Apple's property is `assign`; a view keeps its constraints).
    open private(set) weak var firstItem: AnyObject?
    /// The first item's attribute.
    open private(set) var firstAttribute: Attribute
    /// The relation.
    open private(set) var relation: Relation
    /// The second item of the relation (not retained, as the first).
    open private(set) weak var secondItem: AnyObject?
    /// The second item's attribute.
    open private(set) var secondAttribute: Attribute
    /// The constant added to the second attribute.
    open var constant: CGFloat
    /// Whether the constraint takes part in layout (`false` when made).
    open var isActive = false {
        didSet {
            guard isActive, !oldValue else { return }
            let view = (firstItem as? UIView) ?? (firstItem as? UILayoutGuide)?.owningView
            view?.standInConstraints.append(self)
        }
    }

    init(firstItem: AnyObject, firstAttribute: Attribute, relation: Relation, secondItem: AnyObject, secondAttribute: Attribute, constant: CGFloat) {
        self.firstItem = firstItem
        self.firstAttribute = firstAttribute
        self.relation = relation
        self.secondItem = secondItem
        self.secondAttribute = secondAttribute
        self.constant = constant
    }

    /// Activates each constraint of `constraints`.
    open class func activate(_ constraints: [NSLayoutConstraint]) {
        for constraint in constraints { constraint.isActive = true }
    }
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
