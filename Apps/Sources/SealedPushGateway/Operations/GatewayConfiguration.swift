import SealedPushWire
import SealedPushCrypto
import SealedPushAPNs
import SealedPushFCM
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Why a gateway configuration cannot be used; names the member (a JSON pointer) and what to do, never a secret.
public struct GatewayConfigurationError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The member at fault, as a JSON pointer into the file (`/apps/chat/apns/auth_key`: an app is named by its id once it is known); empty for the whole file.
    public let member: String
    /// What is wrong and what to do.
    public let problem: String

    /// An error about `member`.
    public init(_ member: String, _ problem: String) {
        self.member = member
        self.problem = problem
    }

    /// `member: problem`.
    public var description: String { member.isEmpty ? problem : "\(member): \(problem)" }
}

/// An API key's entry in the configuration: its id, the SHA-256 of the key, and its scopes (gateway v1 §1–§2).
public struct APIKeyEntry: Sendable, Equatable {
    /// The key's name (appears in logs; the key never does).
    public let id: String
    /// SHA-256 of the key (32 bytes).
    public let sha256: [UInt8]
    /// What the key may do.
    public let scopes: Set<Scope>
}

/// What an API key may do (gateway v1 §2).
public enum Scope: String, Sendable, CaseIterable {
    /// Register, read and delete devices.
    case devices
    /// Send messages and read their status.
    case send
    /// Read devices and messages.
    case read
}

/// An app's APNs section: its credentials and topic (the app serves `apns` devices only with it).
public struct APNsAppSettings: Sendable {
    /// The bundle id, sent as `apns-topic`.
    public let topic: String
    /// The `.p8` auth key (absolute path), its key id and team id.
    public let authKeyPath: String
    /// The APNs key id (10 characters).
    public let keyID: String
    /// The Apple team id (10 characters).
    public let teamID: String
    /// Where production pushes go (`nil`: Apple's).
    public let productionURL: String?
    /// Where sandbox pushes go (`nil`: Apple's).
    public let sandboxURL: String?
    /// An extra trust anchor (PEM file, absolute path) for those URLs.
    public let caCertPath: String?
}

/// An app's FCM section (platforms v1 §2): the service account its access tokens are made from, and where FCM is.
public struct FCMAppSettings: Sendable {
    /// The Google service-account key file (absolute path).
    public let serviceAccountPath: String
    /// The Firebase project, or nil for the service account's.
    public let projectID: String?
    /// FCM's base URL, or nil for `https://fcm.googleapis.com`.
    public let url: String?
    /// The token endpoint, or nil for the service account's `token_uri`.
    public let tokenURL: String?
    /// An extra trust anchor (PEM file, absolute path) for those URLs (the local FCM of `fcm serve`).
    public let caCertPath: String?
}

/// An app's Web Push section (platforms v1 §3): its VAPID key and subject, and the endpoint rules of §1.1.
public struct WebPushAppSettings: Sendable {
    /// The VAPID key, P-256 in PKCS#8 PEM (absolute path).
    public let vapidKeyPath: String
    /// `mailto:` or `https:` contact for push services (the JWT's `sub`).
    public let subject: String
    /// Whether endpoints may be private addresses, IP literals or any port (the local push service only).
    public let allowPrivateEndpoints: Bool
    /// Ports besides 443 an endpoint may name.
    public let allowPorts: Set<Int>
    /// An extra trust anchor (PEM file, absolute path) for endpoints (the local push service).
    public let caCertPath: String?
}

/// One app the gateway serves: its push services' credentials (APNs, FCM, Web Push: at least one), its sender
/// keychain, its API keys and bounds.
public struct GatewayAppConfiguration: Sendable {
    /// `[a-z0-9][a-z0-9._-]{0,63}`: the `{app}` of every `/v1/apps/{app}/…` path.
    public let id: String
    /// The APNs section, or nil: the app serves no `apns` device.
    public let apns: APNsAppSettings?
    /// The FCM section, or nil: the app serves no `fcm` device.
    public let fcm: FCMAppSettings?
    /// The Web Push section, or nil: the app serves no `webpush` device.
    public let webpush: WebPushAppSettings?
    /// The platforms the app serves, in order.
    public var platforms: [PushPlatform] {
        PushPlatform.allCases.filter(serves)
    }
    /// Whether the app has `platform`'s section.
    public func serves(_ platform: PushPlatform) -> Bool {
        switch platform {
        case .apns: apns != nil
        case .fcm: fcm != nil
        case .webpush: webpush != nil
        }
    }
    /// A `sealedpush sender` store whose active key signs every message (absolute path), or `nil`.
    public let senderKeychain: String?
    /// The app's API keys.
    public let apiKeys: [APIKeyEntry]
    /// The most requests in flight for this app to each of its push services.
    public let maxInFlight: Int
    /// Queued deliveries beyond which sends answer 503.
    public let maxQueue: Int
    /// The most deliveries one message may make (`max_fanout`, gateway v1 §5; default 10 000): beyond, `422`.
    public let maxFanout: Int
    /// `/v1/apps/{app}` requests per second before 429.
    public let rateLimit: Int
    /// Where the app's events are POSTed (gateway v1 §8), or `nil` (events are still kept and listed).
    public let webhook: WebhookConfiguration?
    /// The Matrix push gateway section (matrix v1 §1), or `nil`: the app takes no Matrix notifications.
    public var matrix: MatrixAppSettings? = nil
    /// Mailbox mode (mailbox v1 §1): off unless the app's `mailbox` section enables it.
    public var mailbox: MailboxSettings = .disabled
}

/// An app's webhook (gateway v1 §8): the URL events are POSTed to and the secret they are signed with, and
/// during a rotation the previous secret, which signs too (a second `v1=`), so that a receiver still holding it
/// verifies every event until it has the new one.
/// Its `description` names only the URL's origin: never a secret, nor a path that may carry a token.
public struct WebhookConfiguration: Sendable, CustomStringConvertible {
    /// The URL (https, or http to a loopback address).
    public let url: String
    /// The secret file it was read from (absolute path).
    public let secretPath: String
    /// The secret: the file's contents, whitespace trimmed. Kept out of `description`, logs and errors.
    let secret: [UInt8]
    /// The previous secret's file (`previous_secret_file`), during a rotation; `nil` otherwise.
    public let previousSecretPath: String?
    /// The previous secret, whitespace trimmed, or `nil`. Kept out of `description`, logs and errors.
    let previousSecret: [UInt8]?
    /// Events POSTed to it at once (`concurrency`, 1–64), or `nil` for `GatewayOptions.webhookConcurrency` (8).
    public let concurrency: Int?

    /// A webhook posting to `url`, signing with `secret` (read from `secretPath`) and, during a rotation, also with
    /// `previousSecret` (read from `previousSecretPath`).
    public init(url: String, secretPath: String, secret: [UInt8], previousSecretPath: String? = nil, previousSecret: [UInt8]? = nil,
                concurrency: Int? = nil) {
        self.url = url
        self.concurrency = concurrency
        self.secretPath = secretPath
        self.secret = secret
        self.previousSecretPath = previousSecret == nil ? nil : previousSecretPath
        self.previousSecret = previousSecret
    }

    /// The secrets each attempt is signed with: the current one first, then the previous one during a rotation.
    var signingSecrets: [[UInt8]] { [secret] + (previousSecret.map { [$0] } ?? []) }

    /// `webhook to <origin>`.
    public var description: String { "webhook to \(HTTPURL(url)?.origin ?? "?")" }
}

/// The gateway's configuration file (gateway v1 §1), parsed and checked; relative paths resolved against
/// the file's directory.
public struct GatewayConfiguration: Sendable {
    /// The API and device endpoints' address.
    public let listen: HostAndPort
    /// `/metrics`, `/healthz`, `/readyz`.
    public let adminListen: HostAndPort
    /// An address for the device endpoints alone, or `nil` (they are served on `listen`).
    public let deviceListen: HostAndPort?
    /// What devices are told to POST receipts to (`{public_url}/v1/receipts`), no trailing slash.
    public let publicURL: String
    /// The database: `sqlite:PATH` (absolute path here).
    public let database: DatabaseLocation
    /// The file holding the PostgreSQL password (`database_password_file`, absolute path here), if any.
    public let databasePasswordFile: String?
    /// Peers whose `X-Forwarded-For` is believed (exact addresses).
    public let trustedProxies: Set<String>
    /// The device endpoints' budget per source address (`device_rate_limit`, gateway v1 §6: refusals and
    /// failure reports a second, with a burst of the same; default 50).
    public let deviceRateLimit: Int
    /// Host names (lowercased) the admin listener answers besides IP addresses and `localhost` (`admin_hosts`):
    /// a `Host` it does not know gets `421` (DNS rebinding).
    public let adminHosts: Set<String>
    /// The HTTP servers' connection limits and timeouts (`http`, against slow or stalled clients).
    public let http: HTTPLimits
    /// How long a claimed delivery attempt stays leased to its instance without renewal (`lease_seconds`,
    /// 20–3600 s, default 60 s): how soon another instance takes over the attempts of one that died.
    public let lease: Duration
    /// The apps, in file order.
    public let apps: [GatewayAppConfiguration]
    /// Whether a PostgreSQL store listens for new deliveries and events (`listen_notify`, default true): every
    /// instance's workers wake at once instead of at their next poll. `false` for PgBouncer in transaction mode.
    public var listenNotify = true
    /// Whether each PostgreSQL connection starts with `statement_timeout`, `lock_timeout` and
    /// `idle_in_transaction_session_timeout` set (`session_parameters`, default true). `false` sends none: PgBouncer
    /// refuses them at connect; set them on the database role instead.
    public var sessionParameters = true
    /// Warnings found while checking (a group-readable key): logged at start.
    public let warnings: [String]
    /// The file it was read from.
    public let path: String

    /// The limits every HTTP listener applies (configuration member `http`, each member optional): a client
    /// that sends its request head or body too slowly, or keeps an idle connection, is disconnected, and each
    /// listener holds at most `maxConnections` connections (more wait in the kernel's backlog).
    public struct HTTPLimits: Sendable, Equatable {
        /// Seconds from a connection's opening to its first complete request head (`header_timeout`, default 10).
        public var headerTimeout: Duration = .seconds(10)
        /// Seconds from a request head to the end of its body (`body_timeout`, default 10).
        public var bodyTimeout: Duration = .seconds(10)
        /// Seconds a keep-alive connection may wait for its next request after an answer (`idle_timeout`, default 60).
        public var idleTimeout: Duration = .seconds(60)
        /// Connections each listener holds at once (`max_connections`, default 4096).
        public var maxConnections: Int = 4096
        /// Connections one source address holds at once on the API and device listeners
        /// (`max_connections_per_source`; default a quarter of `max_connections`, at most 256, at least 1).
        public var maxConnectionsPerSource: Int = 256
        /// How long the listeners keep answering after the drain ended on SIGTERM (`drain_linger`, seconds, default
        /// 10): receipts of pushes accepted just before the stop still land here, not on a closed port.
        public var drainLinger: Duration = .seconds(10)

        /// The defaults.
        public init() {}
    }

    /// Where the gateway keeps its state.
    public enum DatabaseLocation: Sendable, Equatable {
        /// An SQLite file (single instance).
        case sqlite(path: String)
        /// A PostgreSQL URL (several instances may share it).
        case postgres(url: String)
    }

    /// A host and port to listen on.
    public struct HostAndPort: Sendable, Equatable, CustomStringConvertible {
        /// The host (an IP address or name; IPv6 without brackets).
        public let host: String
        /// The port (0: any free port).
        public let port: Int
        /// `host:port` (`[v6]:port`).
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        /// Parses `HOST:PORT` or `[V6]:PORT`; `nil` when malformed.
        public init?(_ text: String) {
            var host: Substring
            let portText: Substring
            if text.hasPrefix("[") {
                guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
                host = text[text.index(after: text.startIndex)..<close]
                portText = text[text.index(close, offsetBy: 2)...]
            } else {
                guard let colon = text.lastIndex(of: ":") else { return nil }
                host = text[..<colon]
                portText = text[text.index(after: colon)...]
                if host.contains(":") { return nil }
            }
            guard !host.isEmpty, let port = Int(portText), (0...65535).contains(port) else { return nil }
            if host == "localhost" { host = "127.0.0.1" }
            self.host = String(host)
            self.port = port
        }
    }

    /// Reads and checks the file at `path`.
    public static func load(path: String) throws(GatewayConfigurationError) -> GatewayConfiguration {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw GatewayConfigurationError("", "cannot read the configuration file \(path); check the path passed to --config")
        }
        let base = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ""
        return try parse(Array(data), baseDirectory: base.isEmpty ? "." : base, path: path)
    }

    /// Parses configuration JSON; relative paths are resolved against `baseDirectory`.
    public static func parse(_ bytes: [UInt8], baseDirectory: String, path: String = "(inline)") throws(GatewayConfigurationError) -> GatewayConfiguration {
        let root: JSONObject
        do {
            guard case let .object(o) = try JSON.parse(bytes) else {
                throw GatewayConfigurationError("", "the configuration must be a JSON object (gateway v1 §1)")
            }
            root = o
        } catch let error as GatewayConfigurationError { throw error } catch {
            throw GatewayConfigurationError("", "the configuration is not valid JSON (\(error)); fix the file")
        }
        var reader = ConfigReader(base: baseDirectory)
        try reader.allowOnly(root, at: "", ["listen", "admin_listen", "device_listen", "public_url", "database",
                                             "database_password_file", "trusted_proxies", "lease_seconds", "device_rate_limit",
                                             "http", "admin_hosts", "apps", "listen_notify", "session_parameters"])
        let listen = try reader.address(root, "listen", at: "", default: "127.0.0.1:8080")
        let admin = try reader.address(root, "admin_listen", at: "", default: "127.0.0.1:9090")
        let device: HostAndPort? = root["device_listen"].map { _ in () } == nil ? nil
            : try reader.address(root, "device_listen", at: "", default: "")
        guard let publicURLText = try reader.string(root, "public_url", at: ""), let publicURL = HTTPURL(publicURLText),
              publicURL.scheme == "https" || publicURL.isLoopback
        else {
            throw GatewayConfigurationError("/public_url", "give the https URL devices reach this gateway at (http only for a loopback address), e.g. \"https://push.example.com\"")
        }
        let trimmedURL = publicURLText.hasSuffix("/") ? String(publicURLText.dropLast()) : publicURLText
        let database = try reader.database(root)
        let passwordFile = try reader.string(root, "database_password_file", at: "", required: false).map { reader.resolve($0) }
        if let passwordFile {
            try reader.checkSecretFile(passwordFile, member: "/database_password_file", what: "a file holding the PostgreSQL password")
        }
        let deviceRateLimit = try reader.integer(root, "device_rate_limit", at: "", default: 50, range: 1...1_000_000)
        let http = try reader.httpLimits(root)
        var adminHosts = Set<String>()
        if let list = root["admin_hosts"], list != .null {
            guard case let .array(items) = list else { throw GatewayConfigurationError("/admin_hosts", "must be an array of host names, e.g. [\"gateway-admin.internal\"]") }
            for (n, item) in items.enumerated() {
                guard let s = item.stringValue, !s.isEmpty, !s.contains(":"), !s.contains("/") else {
                    throw GatewayConfigurationError("/admin_hosts/\(n)", "must be a host name without port, e.g. \"gateway-admin.internal\"")
                }
                adminHosts.insert(s.lowercased())
            }
        }
        if !(admin.host.hasPrefix("127.") || admin.host == "::1") {
            reader.warnings.append("/admin_listen: \(admin) is not a loopback address; the dashboard and /metrics (queue depths, app ids, APNs answers) are served without authentication to whoever reaches it. Keep it on a private network or behind an authenticating proxy")
        }
        var proxies = Set<String>()
        if let list = root["trusted_proxies"] {
            guard case let .array(items) = list else { throw GatewayConfigurationError("/trusted_proxies", "must be an array of IP addresses") }
            for (n, item) in items.enumerated() {
                guard let s = item.stringValue, !s.isEmpty else { throw GatewayConfigurationError("/trusted_proxies/\(n)", "must be an IP address string") }
                proxies.insert(s)
            }
        }
        // At least 20 s: longer than an APNs request (10 s) after a connection's opening (5 s). On SQLite a lease
        // is not renewed while its attempt runs, and one that lapsed mid-attempt would be claimed and sent again.
        let lease = try reader.integer(root, "lease_seconds", at: "", default: 60, range: 20...3600)
        guard case let .array(appValues)? = root["apps"], !appValues.isEmpty else {
            throw GatewayConfigurationError("/apps", "list at least one app (gateway v1 §1)")
        }
        var apps: [GatewayAppConfiguration] = []
        var seen = Set<String>()
        for (n, value) in appValues.enumerated() {
            let app = try reader.app(value, at: "/apps/\(n)")
            guard seen.insert(app.id).inserted else {
                throw GatewayConfigurationError("/apps/\(n)/id", "the app id \"\(app.id)\" is used twice; each app needs its own id")
            }
            apps.append(app)
        }
        // A key hash listed in two apps would authenticate for the first only: refused, naming both.
        var owners: [[UInt8]: String] = [:]
        for app in apps {
            for key in app.apiKeys {
                if let other = owners[key.sha256], other != app.id {
                    throw GatewayConfigurationError("/apps/\(app.id)/api_keys", "the key \"\(key.id)\" has the same sha256 as a key of app \"\(other)\"; a key belongs to one app: make another with `sealedpush-server gateway new-api-key`")
                }
                owners[key.sha256] = app.id
            }
        }
        try checkMatrixAppIDs(apps)
        var listenNotify = true
        if let value = root["listen_notify"], value != .null {
            guard case let .bool(b) = value else {
                throw GatewayConfigurationError("/listen_notify", "must be true (PostgreSQL wakes every instance's workers through LISTEN/NOTIFY) or false (they poll; for PgBouncer in transaction mode)")
            }
            listenNotify = b
        }
        var sessionParameters = true
        if let value = root["session_parameters"], value != .null {
            guard case let .bool(b) = value else {
                throw GatewayConfigurationError("/session_parameters", "must be true (each PostgreSQL connection starts with its timeouts set) or false (none sent at connect; for PgBouncer in transaction mode, which refuses them)")
            }
            sessionParameters = b
        }
        var configuration = GatewayConfiguration(listen: listen, adminListen: admin, deviceListen: device, publicURL: trimmedURL, database: database,
                                    databasePasswordFile: passwordFile,
                                    trustedProxies: proxies, deviceRateLimit: deviceRateLimit, adminHosts: adminHosts, http: http, lease: .seconds(lease), apps: apps, warnings: reader.warnings, path: path)
        configuration.listenNotify = listenNotify
        configuration.sessionParameters = sessionParameters
        return configuration
    }

    /// Whether `id` is a valid app id: `[a-z0-9][a-z0-9._-]{0,63}`.
    public static func isValidAppID(_ id: String) -> Bool {
        let b = Array(id.utf8)
        guard (1...64).contains(b.count) else { return false }
        for (i, c) in b.enumerated() {
            let alnum = (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39)
            if i == 0 ? !alnum : !(alnum || c == 0x2e || c == 0x5f || c == 0x2d) { return false }
        }
        return true
    }
}

/// Reads members of the configuration, naming each by its JSON pointer when refusing it.
struct ConfigReader {
    let base: String
    var warnings: [String] = []

    init(base: String) { self.base = base }

    func allowOnly(_ o: JSONObject, at pointer: String, _ names: Set<String>) throws(GatewayConfigurationError) {
        for member in o where !names.contains(member.key) {
            throw GatewayConfigurationError("\(pointer)/\(member.key)", "is not a configuration member; check its spelling (gateway v1 §1 lists them)")
        }
    }

    func string(_ o: JSONObject, _ name: String, at pointer: String, required: Bool = true) throws(GatewayConfigurationError) -> String? {
        switch o[name] {
        case nil: if required { throw GatewayConfigurationError("\(pointer)/\(name)", "is missing") } else { return nil }
        case .null?: if required { throw GatewayConfigurationError("\(pointer)/\(name)", "must be a string, not null") } else { return nil }
        case let .string(s)?: return s
        default: throw GatewayConfigurationError("\(pointer)/\(name)", "must be a string")
        }
    }

    func integer(_ o: JSONObject, _ name: String, at pointer: String, default value: Int, range: ClosedRange<Int>) throws(GatewayConfigurationError) -> Int {
        guard let v = o[name], v != .null else { return value }
        guard let i = v.intValue, range.contains(Int(i)) else {
            throw GatewayConfigurationError("\(pointer)/\(name)", "must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return Int(i)
    }

    func address(_ o: JSONObject, _ name: String, at pointer: String, default value: String) throws(GatewayConfigurationError) -> GatewayConfiguration.HostAndPort {
        let text = try string(o, name, at: pointer, required: false) ?? value
        guard let address = GatewayConfiguration.HostAndPort(text) else {
            throw GatewayConfigurationError("\(pointer)/\(name)", "must be HOST:PORT (e.g. \"127.0.0.1:8080\", \"[::1]:8080\")")
        }
        return address
    }

    func resolve(_ path: String) -> String {
        path.hasPrefix("/") ? path : (base.hasSuffix("/") ? base : base + "/") + path
    }

    func database(_ root: JSONObject) throws(GatewayConfigurationError) -> GatewayConfiguration.DatabaseLocation {
        let text = try string(root, "database", at: "", required: false) ?? "sqlite:gateway.db"
        if text.hasPrefix("sqlite:") {
            let file = String(text.dropFirst("sqlite:".count))
            guard !file.isEmpty else { throw GatewayConfigurationError("/database", "give the SQLite file after \"sqlite:\", e.g. \"sqlite:/var/lib/sealedpush/gateway.db\"") }
            let path = resolve(file)
            // An existing database holds device tokens and key records: it must not be readable by others.
            if let mode = Self.mode(of: path), mode & 0o007 != 0 {
                throw GatewayConfigurationError("/database", "\(path) is readable by others (mode \(String(mode & 0o777, radix: 8))); run `chmod 600 \(path)` (the gateway creates it 0600)")
            }
            return .sqlite(path: path)
        }
        if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            return .postgres(url: try Self.securedPostgresURL(text))
        }
        throw GatewayConfigurationError("/database", "must be \"sqlite:PATH\" or \"postgres://user@host:5432/db\"")
    }

    mutating func app(_ value: JSONValue, at pointer: String) throws(GatewayConfigurationError) -> GatewayAppConfiguration {
        guard case let .object(o) = value else { throw GatewayConfigurationError(pointer, "each app must be an object") }
        try allowOnly(o, at: pointer, ["id", "topic", "apns", "fcm", "webpush", "sender_keychain", "api_keys", "max_in_flight", "max_queue",
                                       "max_fanout", "rate_limit", "webhook", "matrix", "mailbox"])
        let id = try string(o, "id", at: pointer)!
        guard GatewayConfiguration.isValidAppID(id) else {
            throw GatewayConfigurationError("\(pointer)/id", "must match [a-z0-9][a-z0-9._-]{0,63}")
        }
        // From here the app is named by its id, not its index (`/apps/chat/apns/auth_key`), as at run time.
        let pointer = "/apps/\(id)"
        let apns = try apnsSection(o, at: pointer)
        let fcm = try fcmSection(o, at: pointer)
        let webpush = try webpushSection(o, at: pointer)
        guard apns != nil || fcm != nil || webpush != nil else {
            throw GatewayConfigurationError(pointer, "serves no platform: give at least one of apns, fcm and webpush (platforms v1 §4)")
        }
        let sender = try string(o, "sender_keychain", at: pointer, required: false).map(resolve)
        if let sender {
            guard (try? FileManager.default.attributesOfItem(atPath: sender)[.type] as? FileAttributeType) == .typeDirectory else {
                throw GatewayConfigurationError("\(pointer)/sender_keychain", "\(sender) is not a sender store; create one with `sealedpush sender generate --keychain DIR`")
            }
        }
        guard case let .array(keyValues)? = o["api_keys"], !keyValues.isEmpty else {
            throw GatewayConfigurationError("\(pointer)/api_keys", "list at least one API key: {\"id\", \"sha256\", \"scopes\"}; make one with `sealedpush-server gateway new-api-key`")
        }
        var keys: [APIKeyEntry] = []
        for (n, kv) in keyValues.enumerated() {
            let at = "\(pointer)/api_keys/\(n)"
            guard case let .object(k) = kv else { throw GatewayConfigurationError(at, "must be an object {\"id\", \"sha256\", \"scopes\"}") }
            try allowOnly(k, at: at, ["id", "sha256", "scopes"])
            let keyName = try string(k, "id", at: at)!
            guard let hex = try string(k, "sha256", at: at), hex.utf8.count == 64, let digest = try? Hex.decode(hex, allowUppercase: true) else {
                throw GatewayConfigurationError("\(at)/sha256", "must be the 64 hex digits of the key's SHA-256 (`sealedpush-server gateway new-api-key` prints it)")
            }
            guard case let .array(scopeValues)? = k["scopes"], !scopeValues.isEmpty else {
                throw GatewayConfigurationError("\(at)/scopes", "list one or more of \"send\", \"devices\", \"read\"")
            }
            var scopes = Set<Scope>()
            for (m, s) in scopeValues.enumerated() {
                guard let name = s.stringValue, let scope = Scope(rawValue: name) else {
                    throw GatewayConfigurationError("\(at)/scopes/\(m)", "must be \"send\", \"devices\" or \"read\"")
                }
                scopes.insert(scope)
            }
            keys.append(APIKeyEntry(id: keyName, sha256: digest, scopes: scopes))
        }
        let webhook = try self.webhook(o, at: pointer)
        var app = GatewayAppConfiguration(
            id: id, apns: apns, fcm: fcm, webpush: webpush, senderKeychain: sender, apiKeys: keys,
            maxInFlight: try integer(o, "max_in_flight", at: pointer, default: 100, range: 1...10_000),
            maxQueue: try integer(o, "max_queue", at: pointer, default: 1_000_000, range: 1...1_000_000_000),
            maxFanout: try integer(o, "max_fanout", at: pointer, default: 10_000, range: 1...1_000_000),
            rateLimit: try integer(o, "rate_limit", at: pointer, default: 1000, range: 1...1_000_000),
            webhook: webhook,
            matrix: try matrixSection(o, at: pointer, serves: { platform in
                switch platform {
                case .apns: apns != nil
                case .fcm: fcm != nil
                case .webpush: webpush != nil
                }
            }))
        app.mailbox = try mailboxSection(o, at: pointer)
        return app
    }

    /// `"topic"` and `"apns": {"auth_key", "key_id", "team_id", "production_url"?, "sandbox_url"?, "ca_cert"?}`, or nil
    /// when the app has no `apns` section (then `topic` is not read: it belongs to APNs alone).
    mutating func apnsSection(_ o: JSONObject, at pointer: String) throws(GatewayConfigurationError) -> APNsAppSettings? {
        guard let value = o["apns"], value != .null else {
            if o["topic"] != nil, o["topic"] != .null {
                throw GatewayConfigurationError("\(pointer)/topic", "is APNs's bundle id, and this app has no apns section: add one, or remove topic")
            }
            return nil
        }
        guard case let .object(apns) = value else { throw GatewayConfigurationError("\(pointer)/apns", "must be an object: give auth_key, key_id and team_id") }
        guard let topic = try string(o, "topic", at: pointer, required: false) else {
            throw GatewayConfigurationError("\(pointer)/topic", "is missing: an app with an apns section needs its bundle id, e.g. \"com.example.chat\"")
        }
        guard !topic.isEmpty, topic.utf8.count <= 255, !topic.contains(where: { $0.isWhitespace }) else {
            throw GatewayConfigurationError("\(pointer)/topic", "must be the app's bundle id, e.g. \"com.example.chat\"")
        }
        try allowOnly(apns, at: "\(pointer)/apns", ["auth_key", "key_id", "team_id", "production_url", "sandbox_url", "ca_cert"])
        let keyPath = resolve(try string(apns, "auth_key", at: "\(pointer)/apns")!)
        try checkSecretFile(keyPath, member: "\(pointer)/apns/auth_key")
        let keyID = try string(apns, "key_id", at: "\(pointer)/apns")!
        let teamID = try string(apns, "team_id", at: "\(pointer)/apns")!
        guard APNsSigningKey.isValidID(keyID) else { throw GatewayConfigurationError("\(pointer)/apns/key_id", "must be the 10-character key id Apple shows for the .p8 key") }
        guard APNsSigningKey.isValidID(teamID) else { throw GatewayConfigurationError("\(pointer)/apns/team_id", "must be the 10-character Apple team id") }
        var urls: [String?] = []
        for name in ["production_url", "sandbox_url"] {
            urls.append(try httpsURL(apns, name, at: "\(pointer)/apns", example: "https://127.0.0.1:2197", default: "Apple's"))
        }
        let ca = try caCert(apns, at: "\(pointer)/apns")
        return APNsAppSettings(topic: topic, authKeyPath: keyPath, keyID: keyID, teamID: teamID, productionURL: urls[0], sandboxURL: urls[1],
                               caCertPath: ca)
    }

    /// `"fcm": {"service_account", "project_id"?, "url"?, "token_url"?, "ca_cert"?}` (platforms v1 §2), or nil.
    mutating func fcmSection(_ o: JSONObject, at pointer: String) throws(GatewayConfigurationError) -> FCMAppSettings? {
        guard let value = o["fcm"], value != .null else { return nil }
        let at = "\(pointer)/fcm"
        guard case let .object(fcm) = value else { throw GatewayConfigurationError(at, "must be an object: give service_account") }
        try allowOnly(fcm, at: at, ["service_account", "project_id", "url", "token_url", "ca_cert"])
        let account = resolve(try string(fcm, "service_account", at: at)!)
        try checkSecretFile(account, member: "\(at)/service_account", what: "the Google service-account key file (JSON) of the Firebase project")
        let project = try string(fcm, "project_id", at: at, required: false)
        if let project, !FCMServiceAccount.isValidProjectID(project) {
            throw GatewayConfigurationError("\(at)/project_id", "must be \(FCMServiceAccount.projectIDRule), or null for the service account's")
        }
        return FCMAppSettings(serviceAccountPath: account, projectID: project,
                              url: try httpsURL(fcm, "url", at: at, example: "https://127.0.0.1:8443", default: "https://fcm.googleapis.com"),
                              tokenURL: try httpsURL(fcm, "token_url", at: at, example: "https://127.0.0.1:8443/token", default: "the service account's token_uri"),
                              caCertPath: try caCert(fcm, at: at))
    }

    /// `"webpush": {"vapid_key", "subject", "allow_private_endpoints"?, "allow_ports"?, "ca_cert"?}` (platforms v1 §3), or nil.
    mutating func webpushSection(_ o: JSONObject, at pointer: String) throws(GatewayConfigurationError) -> WebPushAppSettings? {
        guard let value = o["webpush"], value != .null else { return nil }
        let at = "\(pointer)/webpush"
        guard case let .object(w) = value else { throw GatewayConfigurationError(at, "must be an object: give vapid_key and subject") }
        try allowOnly(w, at: at, ["vapid_key", "subject", "allow_private_endpoints", "allow_ports", "ca_cert"])
        let key = resolve(try string(w, "vapid_key", at: at)!)
        try checkSecretFile(key, member: "\(at)/vapid_key", what: "the VAPID key (P-256, PKCS#8 PEM; `sealedpush-server webpush generate-vapid --out FILE` makes one)")
        let subject = try string(w, "subject", at: at)!
        guard subject.hasPrefix("mailto:") && subject.count > 7 || (HTTPURL(subject)?.scheme == "https") else {
            throw GatewayConfigurationError("\(at)/subject", "must be a mailto: or https: URL push services can reach you at, e.g. \"mailto:ops@example.com\"")
        }
        var allowPrivate = false
        switch w["allow_private_endpoints"] {
        case nil, .null?: break
        case let .bool(b)?: allowPrivate = b
        default: throw GatewayConfigurationError("\(at)/allow_private_endpoints", "must be true or false")
        }
        var ports = Set<Int>()
        switch w["allow_ports"] {
        case nil, .null?: break
        case let .array(items)?:
            for (n, item) in items.enumerated() {
                guard case let .int(p) = item, (1...65535).contains(p) else {
                    throw GatewayConfigurationError("\(at)/allow_ports/\(n)", "must be a port number from 1 to 65535")
                }
                ports.insert(Int(p))
            }
        default: throw GatewayConfigurationError("\(at)/allow_ports", "must be an array of port numbers")
        }
        if allowPrivate {
            warnings.append("\(at)/allow_private_endpoints is true: Web Push endpoints may name private and loopback addresses, IP literals and any port — for the local push service only, never in production (platforms v1 §1.1)")
        }
        return WebPushAppSettings(vapidKeyPath: key, subject: subject, allowPrivateEndpoints: allowPrivate, allowPorts: ports,
                                  caCertPath: try caCert(w, at: at))
    }

    /// An optional https URL member, or nil for the default.
    func httpsURL(_ o: JSONObject, _ name: String, at pointer: String, example: String, default what: String) throws(GatewayConfigurationError) -> String? {
        guard let url = try string(o, name, at: pointer, required: false) else { return nil }
        guard let parsed = HTTPURL(url), parsed.scheme == "https" else {
            throw GatewayConfigurationError("\(pointer)/\(name)", "must be an https URL (e.g. \"\(example)\") or null for \(what)")
        }
        return url
    }

    /// An optional `ca_cert` member: a readable PEM file (absolute path), or nil.
    func caCert(_ o: JSONObject, at pointer: String) throws(GatewayConfigurationError) -> String? {
        let ca = try string(o, "ca_cert", at: pointer, required: false).map(resolve)
        if let ca, FileManager.default.contents(atPath: ca) == nil {
            throw GatewayConfigurationError("\(pointer)/ca_cert", "cannot read \(ca); give a PEM CA certificate or null")
        }
        return ca
    }

    /// The shortest webhook secret accepted, in bytes.
    static let minimumWebhookSecret = 16

    /// `"webhook": {"url", "secret_file", "previous_secret_file"?}` (gateway v1 §8), or nil when absent or null.
    mutating func webhook(_ o: JSONObject, at pointer: String) throws(GatewayConfigurationError) -> WebhookConfiguration? {
        guard let value = o["webhook"], value != .null else { return nil }
        let at = "\(pointer)/webhook"
        guard case let .object(w) = value else {
            throw GatewayConfigurationError(at, "must be an object {\"url\": \"https://…\", \"secret_file\": \"webhook.secret\"}, or null")
        }
        try allowOnly(w, at: at, ["url", "secret_file", "previous_secret_file", "concurrency"])
        let url = try string(w, "url", at: at)!
        let concurrency = w["concurrency"].map { $0 == .null } == false
            ? try integer(w, "concurrency", at: at, default: GatewayOptions.defaultWebhookConcurrency, range: 1...64) : nil
        guard let parsed = HTTPURL(url), parsed.scheme == "https" || parsed.isLoopback else {
            throw GatewayConfigurationError("\(at)/url", "give the https URL events are POSTed to (http only for a loopback address), e.g. \"https://backend.example.com/sealedpush/events\"")
        }
        let path = resolve(try string(w, "secret_file", at: at)!)
        let secret = try webhookSecret(path, member: "\(at)/secret_file")
        guard let previousName = try string(w, "previous_secret_file", at: at, required: false) else {
            return WebhookConfiguration(url: url, secretPath: path, secret: secret, concurrency: concurrency)
        }
        // During a rotation: the secret the receiver may still hold, which signs too until the member is removed.
        let previousPath = resolve(previousName)
        let previous = try webhookSecret(previousPath, member: "\(at)/previous_secret_file")
        guard previous != secret else {
            throw GatewayConfigurationError("\(at)/previous_secret_file", "\(previousPath) holds the same secret as secret_file; during a rotation it holds the old secret, and afterwards the member is removed")
        }
        return WebhookConfiguration(url: url, secretPath: path, secret: secret, previousSecretPath: previousPath, previousSecret: previous,
                                    concurrency: concurrency)
    }

    /// A webhook secret file's contents, whitespace trimmed: checked like every secret file, and long enough.
    mutating func webhookSecret(_ path: String, member: String) throws(GatewayConfigurationError) -> [UInt8] {
        let read = try GatewaySecretFile.read(path, member: member, what: "a file holding the webhook secret (e.g. `openssl rand -hex 32 > webhook.secret`)")
        if let warning = read.warning { warnings.append(warning) }
        let secret = Array(String(decoding: read.bytes.unsafeCopyToArray(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).utf8)
        guard secret.count >= Self.minimumWebhookSecret else {
            throw GatewayConfigurationError(member, "\(path) holds fewer than \(Self.minimumWebhookSecret) bytes once whitespace is trimmed; write a long random secret, e.g. `openssl rand -hex 32`")
        }
        return secret
    }

    /// `"http": {"header_timeout", "body_timeout", "idle_timeout", "max_connections", "max_connections_per_source",
    /// "drain_linger"}`, each optional.
    func httpLimits(_ root: JSONObject) throws(GatewayConfigurationError) -> GatewayConfiguration.HTTPLimits {
        var limits = GatewayConfiguration.HTTPLimits()
        guard let value = root["http"], value != .null else { return limits }
        guard case let .object(o) = value else {
            throw GatewayConfigurationError("/http", "must be an object {\"header_timeout\", \"body_timeout\", \"idle_timeout\", \"max_connections\", \"max_connections_per_source\", \"drain_linger\"} (seconds and counts)")
        }
        try allowOnly(o, at: "/http", ["header_timeout", "body_timeout", "idle_timeout", "max_connections", "max_connections_per_source", "drain_linger"])
        limits.headerTimeout = .seconds(try integer(o, "header_timeout", at: "/http", default: 10, range: 1...3600))
        limits.bodyTimeout = .seconds(try integer(o, "body_timeout", at: "/http", default: 10, range: 1...3600))
        limits.idleTimeout = .seconds(try integer(o, "idle_timeout", at: "/http", default: 60, range: 1...86_400))
        limits.maxConnections = try integer(o, "max_connections", at: "/http", default: 4096, range: 1...1_000_000)
        limits.maxConnectionsPerSource = try integer(o, "max_connections_per_source", at: "/http",
                                                     default: max(1, min(256, limits.maxConnections / 4)), range: 1...1_000_000)
        limits.drainLinger = .seconds(try integer(o, "drain_linger", at: "/http", default: 10, range: 0...300))
        return limits
    }

    /// The permission bits of the file at `path`, or nil when it does not exist (or cannot be read).
    static func mode(of path: String) -> Int? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return nil }
        return switch attributes[.posixPermissions] {
        case let mode as UInt: Int(mode)
        case let mode as Int: mode
        case let mode as UInt16: Int(mode)
        default: nil
        }
    }

    /// A `postgres://` URL as the gateway uses it: one holding a password is refused (it belongs in
    /// `database_password_file`, gateway v1 §1), and one without `sslmode` gets `sslmode=require` unless its host
    /// is this machine (loopback or a Unix socket directory), so that TLS cannot be silently downgraded.
    static func securedPostgresURL(_ url: String) throws(GatewayConfigurationError) -> String {
        let afterScheme = url[url.range(of: "://")!.upperBound...]
        let authorityEnd = afterScheme.firstIndex { $0 == "/" || $0 == "?" } ?? afterScheme.endIndex
        let authority = afterScheme[..<authorityEnd]
        var hostPart = authority
        if let at = authority.lastIndex(of: "@") {
            if authority[..<at].contains(":") {
                throw GatewayConfigurationError("/database", "the URL holds a password; remove it from the URL and put it in a file named by database_password_file (mode 600)")
            }
            hostPart = authority[authority.index(after: at)...]
        }
        var host = String(hostPart)
        if host.hasPrefix("[") { host = String(host.dropFirst().prefix { $0 != "]" }) } else if let colon = host.firstIndex(of: ":") { host = String(host[..<colon]) }
        let query = url.firstIndex(of: "?").map { url[url.index(after: $0)...] } ?? ""
        let parameters = query.split(separator: "&").map { $0.split(separator: "=", maxSplits: 1) }
        if parameters.contains(where: { $0.first == "sslmode" }) { return url }
        let socketDirectory = parameters.contains { $0.first == "host" && ($0.last?.hasPrefix("/") ?? false) }
        let local = socketDirectory || host.isEmpty || host == "localhost" || host == "::1" || host.hasPrefix("127.")
        if local { return url }
        return url + (url.contains("?") ? "&" : "?") + "sslmode=require"
    }

    /// A secret file (the `.p8`, the service account, the VAPID key, the webhook secret, the password file) is
    /// checked by the one check of `GatewaySecretFile` (gateway v1 §1): refused when any user may read or write it,
    /// or when it belongs to another user and the gateway's user could write it; group access only warns.
    mutating func checkSecretFile(_ path: String, member: String, what: String = "the .p8 key Apple issued") throws(GatewayConfigurationError) {
        if let warning = try GatewaySecretFile.read(path, member: member, what: what).warning { warnings.append(warning) }
    }
}
