/// Where the gateway's two databases differ, named once. The store's SQL and its migrations are written for
/// both; what differs is said here (and, for the schema, in `GatewayMigrations`).
enum SQLDialect: String, Sendable, CaseIterable {
    /// SQLite (one instance; one writer connection, so no row locks).
    case sqlite
    /// PostgreSQL (several instances; row locks, `FOR UPDATE SKIP LOCKED`).
    case postgres
}

/// Where the two dialects' schemas differ on purpose (`GatewayMigrations.differences`).
struct SchemaDifferences: Sendable {
    /// Tables only one dialect has.
    let tables: [SQLDialect: [String]]
    /// Columns (`table.column`) whose type differs, and each dialect's type (integer, text, bytes or boolean).
    let columnTypes: [String: (sqlite: String, postgres: String)]
    /// Indexes both dialects have under one name but define apart, and what each serves.
    let indexDefinitions: [String: String]
}

/// One schema version: the statements that bring a database of each dialect to it, applied once, in order.
struct GatewayMigration: Sendable {
    /// Its number, the same in both dialects (recorded in `schema_migrations` on SQLite, `schema_version` on PostgreSQL).
    let version: Int
    /// SQLite's statements.
    let sqlite: [String]
    /// PostgreSQL's statements.
    let postgres: [String]

    /// A version written as it stands in each dialect.
    init(version: Int, sqlite: [String], postgres: [String]) {
        self.version = version
        self.sqlite = sqlite
        self.postgres = postgres
    }

    /// A version whose statements are the same in both dialects.
    init(version: Int, both statements: [String]) {
        self.init(version: version, sqlite: statements, postgres: statements)
    }

    /// The statements of `dialect`.
    func statements(_ dialect: SQLDialect) -> [String] {
        switch dialect {
        case .sqlite: sqlite
        case .postgres: postgres
        }
    }
}

/// The gateway's schema, one list for both stores.
///
/// Versions 1–6 are the two stores' histories as they were shipped when each store kept a list of its own
/// (SQLite reached v6, PostgreSQL v2; PostgreSQL's v3–v6 are empty): they stay as they were, so that every
/// database created by them migrates forward. From v7 on, a version is written once, and where a dialect
/// needs its own statement the entry says so.
enum GatewayMigrations {
    /// Every version, in order.
    static let all: [GatewayMigration] = [
        // The first schema of each store, written apart before this list was one (so each dialect keeps its history).
        GatewayMigration(version: 1, sqlite: [
            "CREATE TABLE settings (name TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL)",
            """
            CREATE TABLE devices (
                app TEXT NOT NULL, device_id TEXT NOT NULL, user_id TEXT NOT NULL, apns_token TEXT NOT NULL,
                environment TEXT NOT NULL, key_record TEXT NOT NULL, key_id TEXT NOT NULL, state TEXT NOT NULL,
                created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, registered_at INTEGER NOT NULL,
                unregistered_at INTEGER, unregistered_reason TEXT, token_reassigned INTEGER NOT NULL DEFAULT 0,
                report_reason TEXT, report_kid TEXT, report_count INTEGER, report_at INTEGER,
                PRIMARY KEY (app, device_id))
            """,
            "CREATE UNIQUE INDEX devices_token ON devices(app, environment, apns_token)",
            "CREATE INDEX devices_user ON devices(app, user_id)",
            "CREATE INDEX devices_updated ON devices(app, updated_at, device_id)",
            "CREATE INDEX devices_key ON devices(key_id)",
            "CREATE TABLE known_users (app TEXT NOT NULL, user_id TEXT NOT NULL, PRIMARY KEY (app, user_id)) WITHOUT ROWID",
            """
            CREATE TABLE messages (message_id TEXT PRIMARY KEY NOT NULL, app TEXT NOT NULL,
                created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL)
            """,
            """
            CREATE TABLE deliveries (
                delivery_id TEXT PRIMARY KEY NOT NULL, app TEXT NOT NULL, message_id TEXT NOT NULL, device_id TEXT NOT NULL,
                apns_token TEXT NOT NULL, environment TEXT NOT NULL, payload BLOB NOT NULL, receipt_sha256 BLOB,
                priority INTEGER NOT NULL, collapse_id TEXT NOT NULL, apns_expiration INTEGER NOT NULL, expires_at INTEGER NOT NULL,
                apns_id TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, apns_status INTEGER, reason TEXT,
                created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, next_attempt_at INTEGER, accepted_at INTEGER,
                delivered_at INTEGER, seq INTEGER NOT NULL, lease_until INTEGER, generation INTEGER NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX deliveries_due ON deliveries(app, state, next_attempt_at)",
            "CREATE INDEX deliveries_message ON deliveries(message_id)",
            "CREATE INDEX deliveries_device ON deliveries(app, device_id, state)",
            """
            CREATE TABLE idempotency (app TEXT NOT NULL, key TEXT NOT NULL, body_hmac BLOB NOT NULL, status INTEGER NOT NULL,
                response BLOB NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (app, key))
            """,
            """
            CREATE TABLE reports (app TEXT NOT NULL, kid TEXT NOT NULL, reason TEXT NOT NULL, count INTEGER NOT NULL,
                last_at INTEGER NOT NULL, PRIMARY KEY (app, kid, reason))
            """,
        ], postgres: [
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)",
            "CREATE TABLE settings (name TEXT PRIMARY KEY, value BYTEA NOT NULL)",
            """
            CREATE TABLE devices (
                app TEXT NOT NULL, device_id TEXT NOT NULL, user_id TEXT NOT NULL, apns_token TEXT NOT NULL,
                environment TEXT NOT NULL, key_record TEXT NOT NULL, key_id TEXT NOT NULL, state TEXT NOT NULL,
                created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, registered_at BIGINT NOT NULL,
                unregistered_at BIGINT, unregistered_reason TEXT, token_reassigned BOOLEAN NOT NULL DEFAULT FALSE,
                report_reason TEXT, report_kid TEXT, report_count BIGINT, report_at BIGINT,
                PRIMARY KEY (app, device_id))
            """,
            "CREATE UNIQUE INDEX devices_token ON devices(app, environment, apns_token)",
            "CREATE INDEX devices_user ON devices(app, user_id)",
            "CREATE INDEX devices_updated ON devices(app, updated_at, device_id)",
            "CREATE INDEX devices_key ON devices(key_id)",
            "CREATE TABLE known_users (app TEXT NOT NULL, user_id TEXT NOT NULL, PRIMARY KEY (app, user_id))",
            "CREATE TABLE messages (message_id TEXT PRIMARY KEY, app TEXT NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL)",
            "CREATE INDEX messages_expires ON messages(expires_at, message_id)",
            """
            CREATE TABLE deliveries (
                delivery_id TEXT PRIMARY KEY, app TEXT NOT NULL, message_id TEXT NOT NULL, device_id TEXT NOT NULL,
                apns_token TEXT NOT NULL, environment TEXT NOT NULL, payload BYTEA NOT NULL, receipt_sha256 BYTEA,
                priority INTEGER NOT NULL, collapse_id TEXT NOT NULL, apns_expiration BIGINT NOT NULL, expires_at BIGINT NOT NULL,
                apns_id TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, apns_status INTEGER, reason TEXT,
                created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, next_attempt_at BIGINT, accepted_at BIGINT,
                delivered_at BIGINT, seq BIGINT NOT NULL, lease_until BIGINT, lease_generation BIGINT NOT NULL DEFAULT 0, leased_by TEXT)
            """,
            "CREATE INDEX deliveries_due ON deliveries(app, next_attempt_at) WHERE state = 'queued'",
            "CREATE INDEX deliveries_message ON deliveries(message_id)",
            "CREATE INDEX deliveries_device ON deliveries(app, device_id) WHERE state = 'queued'",
            """
            CREATE TABLE idempotency (app TEXT NOT NULL, key TEXT NOT NULL, body_hmac BYTEA NOT NULL, status INTEGER NOT NULL,
                response BYTEA NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (app, key))
            """,
            "CREATE INDEX idempotency_created ON idempotency(created_at)",
            """
            CREATE TABLE reports (app TEXT NOT NULL, kid TEXT NOT NULL, reason TEXT NOT NULL, count BIGINT NOT NULL,
                last_at BIGINT NOT NULL, PRIMARY KEY (app, kid, reason))
            """,
            "CREATE TABLE instances (instance_id TEXT PRIMARY KEY, started_at BIGINT NOT NULL, last_seen BIGINT NOT NULL)",
        ]),
        // SQLite v2: what pruning (records past expiry + 7 days, idempotency answers past 24 hours) looks up.
        // PostgreSQL v2: webhook events (gateway v1 §8), written in the transaction of the change that causes them; `position`
        // (an identity) orders the listing, and claims lease them like deliveries (`lease_generation`, `leased_by`).
        // What the dashboard's last-day counts look up; when a delivery's `revealed` receipt arrived (reveal v1 §8);
        // a readable name per instance for the dashboard.
        GatewayMigration(version: 2, sqlite: [
            "CREATE INDEX messages_expires ON messages(expires_at, message_id)",
            "CREATE INDEX idempotency_created ON idempotency(created_at)",
        ], postgres: [
            """
            CREATE TABLE events (
                position BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE, app TEXT NOT NULL,
                type TEXT NOT NULL, created_at BIGINT NOT NULL, body TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending',
                attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at BIGINT NOT NULL, lease_until BIGINT,
                lease_generation BIGINT NOT NULL DEFAULT 0, leased_by TEXT)
            """,
            "CREATE INDEX events_due ON events(app, next_attempt_at, position) WHERE state = 'pending'",
            "CREATE INDEX events_app ON events(app, position)",
            "CREATE INDEX events_created ON events(created_at)",
            "CREATE INDEX deliveries_created ON deliveries(created_at)",
            "ALTER TABLE deliveries ADD COLUMN revealed_at BIGINT",
            "ALTER TABLE instances ADD COLUMN name TEXT",
        ]),
        // SQLite v3: the hot statements answered from indexes alone. Without statistics SQLite read a user's devices
        // through devices_updated (every device of the app, to skip a sort): about 1000 rows per message in
        // the benchmark. The due index carries lease_until, so a claim skips leased rows without reading
        // them; queued deliveries have an index of their own for the per-second queue depth.
        // PostgreSQL: nothing (its v1 and v2 already had this, or its own form of it).
        GatewayMigration(version: 3, sqlite: [
            "DROP INDEX devices_user",
            "CREATE INDEX devices_user ON devices(app, user_id, updated_at, device_id)",
            "DROP INDEX deliveries_due",
            "CREATE INDEX deliveries_due ON deliveries(app, state, next_attempt_at, lease_until)",
            "CREATE INDEX deliveries_queued ON deliveries(app, created_at) WHERE state = 'queued'",
        ], postgres: []),
        // SQLite v4: webhook events (gateway v1 §8), written in the transaction of the change that causes them; `position`
        // orders the listing. And what the dashboard's last-day counts look up.
        // PostgreSQL: nothing (its v1 and v2 already had this, or its own form of it).
        GatewayMigration(version: 4, sqlite: [
            """
            CREATE TABLE events (
                position INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, app TEXT NOT NULL, type TEXT NOT NULL,
                created_at INTEGER NOT NULL, body TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending',
                attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at INTEGER NOT NULL, lease_until INTEGER,
                generation INTEGER NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX events_due ON events(app, state, next_attempt_at)",
            "CREATE INDEX events_app ON events(app, position)",
            "CREATE INDEX events_created ON events(created_at)",
            "CREATE INDEX deliveries_created ON deliveries(created_at)",
        ], postgres: []),
        // SQLite v5: when a delivery's `revealed` receipt arrived (reveal v1 §8).
        // PostgreSQL: nothing (its v1 and v2 already had this, or its own form of it).
        GatewayMigration(version: 5, sqlite: ["ALTER TABLE deliveries ADD COLUMN revealed_at INTEGER"], postgres: []),
        // SQLite v6: a device's deliveries indexed without their state. With `state` in the key every state change moved
        // the entry (a page at a random place in the index per delivery, written to the WAL and checkpointed);
        // now only the insert touches it. The one statement that uses it (cancelling a device's unsent
        // deliveries, on deletion or token reassignment) reads the device's rows and keeps the queued ones.
        // PostgreSQL: nothing (its v1 and v2 already had this, or its own form of it).
        GatewayMigration(version: 6, sqlite: [
            "DROP INDEX deliveries_device",
            "CREATE INDEX deliveries_device ON deliveries(app, device_id)",
        ], postgres: []),
        // v7: a cancellation asked for while the delivery's push was in flight (gateway v1 §5, revision 2): the
        // push is sent and ends as APNs answers; the cancellation applies only if APNs neither took it nor refused it.
        GatewayMigration(version: 7, both: ["ALTER TABLE deliveries ADD COLUMN cancel_reason TEXT"]),
        // v8: a receipt names its delivery by (message id, SHA-256 of its token): it reads and locks that one row,
        // not every delivery of its message. The index also serves what deliveries_message served (a message's
        // deliveries, pruning by message id).
        GatewayMigration(version: 8, both: [
            "DROP INDEX deliveries_message",
            "CREATE INDEX deliveries_receipt ON deliveries(message_id, receipt_sha256)",
        ]),
        // v9: the two schemas agree (a test reads both catalogs), save for `differences`. SQLite names its lease
        // columns as PostgreSQL does, so one set of statements serves both (`DeliveryQueries`): `lease_generation`,
        // and `leased_by` (NULL on SQLite, whose one instance holds every lease). PostgreSQL indexes a user's
        // devices in the order they are listed, and the queued rows by creation time (the per-second queue depth),
        // as SQLite has since v3.
        GatewayMigration(version: 9, sqlite: [
            "ALTER TABLE deliveries RENAME COLUMN generation TO lease_generation",
            "ALTER TABLE deliveries ADD COLUMN leased_by TEXT",
            "ALTER TABLE events RENAME COLUMN generation TO lease_generation",
            "ALTER TABLE events ADD COLUMN leased_by TEXT",
        ], postgres: [
            "DROP INDEX devices_user",
            "CREATE INDEX devices_user ON devices(app, user_id, updated_at, device_id)",
            "CREATE INDEX deliveries_queued ON deliveries(app, created_at) WHERE state = 'queued'",
        ]),
        // v10 (platforms v1): devices and deliveries of three push services. A row's `apns_token` holds its address on
        // every platform (APNs token, FCM registration token, Web Push endpoint) and `environment` names its service:
        // `production`/`sandbox` for APNs, else `fcm` or `webpush` — so the unique index over (app, environment,
        // apns_token) is the token rule of gateway v1 §4 per platform. A webpush device keeps its subscription's keys;
        // a delivery its platform (each platform's worker claims its own: `max_in_flight` is per app and platform, and
        // the due index leads with it) and the push service's id for it (FCM's `name`, a Web Push `Location`).
        GatewayMigration(version: 10, sqlite: [
            "ALTER TABLE devices ADD COLUMN webpush_p256dh TEXT",
            "ALTER TABLE devices ADD COLUMN webpush_auth TEXT",
            "ALTER TABLE deliveries ADD COLUMN platform TEXT NOT NULL DEFAULT 'apns'",
            "ALTER TABLE deliveries ADD COLUMN platform_id TEXT",
            "DROP INDEX deliveries_due",
            "CREATE INDEX deliveries_due ON deliveries(app, platform, state, next_attempt_at, lease_until)",
        ], postgres: [
            "ALTER TABLE devices ADD COLUMN webpush_p256dh TEXT",
            "ALTER TABLE devices ADD COLUMN webpush_auth TEXT",
            "ALTER TABLE deliveries ADD COLUMN platform TEXT NOT NULL DEFAULT 'apns'",
            "ALTER TABLE deliveries ADD COLUMN platform_id TEXT",
            "DROP INDEX deliveries_due",
            "CREATE INDEX deliveries_due ON deliveries(app, platform, next_attempt_at) WHERE state = 'queued'",
        ]),
        // v11 (mailbox v1): a mailbox delivery's row beside its delivery (the SHA-256 of its handle's token, when it
        // was first fetched and how often, and why it is gone: `collected`, `retracted` or `expired`), its sealed
        // envelope in a table of its own, whose row is DELETED when the delivery is gone (the bytes, not a flag),
        // and the list's single-use challenges (§7), kept in the store so that every instance answers them. A retraction
        // push (§6) carries a handle of its own to the retracted delivery: its token's hash is `retraction_sha256`.
        GatewayMigration(version: 11, sqlite: mailboxSchema(integer: "INTEGER", bytes: "BLOB"),
                         postgres: mailboxSchema(integer: "BIGINT", bytes: "BYTEA")),
        // v12 (#47): PostgreSQL wakes the workers of every instance. A statement that inserts deliveries or events
        // notifies `sealedpush_deliveries` / `sealedpush_events` once per app it touched (a statement-level trigger
        // over its transition table: no extra round trip, and PostgreSQL sends the notification at commit, so a
        // listener never claims before the rows are visible; notifications alike within a transaction are sent
        // once). SQLite, one process, announces in the process instead (`StoreWakeHandler`).
        GatewayMigration(version: 12, sqlite: [], postgres: [
            """
            CREATE FUNCTION sealedpush_notify_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM pg_notify('sealedpush_deliveries', app) FROM (SELECT DISTINCT app FROM inserted) AS apps;
                RETURN NULL;
            END $$
            """,
            """
            CREATE FUNCTION sealedpush_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM pg_notify('sealedpush_events', app) FROM (SELECT DISTINCT app FROM inserted) AS apps;
                RETURN NULL;
            END $$
            """,
            "CREATE TRIGGER deliveries_notify AFTER INSERT ON deliveries REFERENCING NEW TABLE AS inserted "
                + "FOR EACH STATEMENT EXECUTE FUNCTION sealedpush_notify_deliveries()",
            "CREATE TRIGGER events_notify AFTER INSERT ON events REFERENCING NEW TABLE AS inserted "
                + "FOR EACH STATEMENT EXECUTE FUNCTION sealedpush_notify_events()",
        ]),
        // The webhook claim takes the oldest due events in position order: with only `events_due` (by due time) a
        // backlog of pending events was read and sorted whole at every claim (PostgreSQL: 2.3 ms of its CPU per
        // event POSTed while 20 000 waited). Pending events in position order let the claim stop at its limit.
        GatewayMigration(version: 13, sqlite: [
            "CREATE INDEX events_pending ON events(app, position) WHERE state = 'pending'",
        ], postgres: [
            "CREATE INDEX events_pending ON events(app, position) WHERE state = 'pending'",
        ]),
    ]

    /// Version 11's statements with each dialect's integer and byte-string types.
    static func mailboxSchema(integer: String, bytes: String) -> [String] {
        [
            """
            CREATE TABLE mailbox (
                delivery_id TEXT PRIMARY KEY NOT NULL, app TEXT NOT NULL, device_id TEXT NOT NULL, message_id TEXT NOT NULL,
                handle_sha256 \(bytes) NOT NULL, created_at \(integer) NOT NULL, expires_at \(integer) NOT NULL,
                fetched_at \(integer), fetches INTEGER NOT NULL DEFAULT 0, gone TEXT, gone_at \(integer), retraction_sha256 \(bytes))
            """,
            "CREATE INDEX mailbox_device ON mailbox(app, device_id, created_at)",
            "CREATE INDEX mailbox_message ON mailbox(message_id)",
            "CREATE INDEX mailbox_expires ON mailbox(expires_at)",
            // The sweep's search for rows whose grace ended: the waiting rows only.
            "CREATE INDEX mailbox_waiting ON mailbox(fetched_at) WHERE gone IS NULL",
            "CREATE TABLE mailbox_envelopes (delivery_id TEXT PRIMARY KEY NOT NULL, envelope \(bytes) NOT NULL)",
            """
            CREATE TABLE mailbox_challenges (challenge_id TEXT PRIMARY KEY NOT NULL, app TEXT NOT NULL, device_id TEXT NOT NULL,
                answer_sha256 \(bytes) NOT NULL, expires_at \(integer) NOT NULL)
            """,
        ]
    }

    /// Where the two schemas differ on purpose once every version is applied: a test reads both catalogs and
    /// allows these differences, and no other.
    static let differences = SchemaDifferences(
        tables: [
            // Each store's record of the versions applied, named before the list was one (existing databases keep it).
            .sqlite: ["schema_migrations"],
            // The instances sharing the database (gateway v1 §9); SQLite serves one.
            .postgres: ["schema_version", "instances"],
        ],
        columnTypes: [
            // SQLite has no BOOLEAN: 0 or 1.
            "devices.token_reassigned": (sqlite: "integer", postgres: "boolean"),
        ],
        indexDefinitions: [
            // SQLite: (app, platform, state, next_attempt_at, lease_until) over every row, so a claim finds its rows in the
            // index alone (rowid is in every index). PostgreSQL: (app, platform, next_attempt_at) over the queued rows only.
            "deliveries_due": "the claim's search",
            // SQLite: (app, device_id) over every row, so a state change never moves an entry (v6). PostgreSQL: the
            // queued rows only (an UPDATE there writes a row version's index entries anew anyway).
            "deliveries_device": "cancelling a device's deliveries",
            // SQLite: (app, state, next_attempt_at). PostgreSQL: (app, next_attempt_at, position) over pending rows.
            "events_due": "the webhook claim's search",
        ])

    /// The versions as `dialect` applies them.
    static func list(for dialect: SQLDialect) -> [(version: Int, statements: [String])] {
        all.map { ($0.version, $0.statements(dialect)) }
    }
}
