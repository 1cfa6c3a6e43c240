import SealedPushCLI
import ArgumentParser
import Foundation
import GRDB
import SealedPushGateway
#if canImport(Glibc)
import Glibc
#endif

extension GatewayCommand {
    /// `sealedpush-server gateway backup --config FILE --to FILE`: a consistent copy of the live SQLite database,
    /// taken while the gateway runs (docs/gateway.md, "Backup and restore").
    struct Backup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "backup",
            abstract: "Copy the gateway's SQLite database to a new file, consistent while the gateway keeps running.",
            discussion: """
                Reads `database` from the configuration and writes a snapshot of it with SQLite's VACUUM INTO: \
                one read transaction, so the copy holds exactly the transactions committed when it began (every \
                message answered 202 by then) and the gateway keeps sending meanwhile. The copy is created with \
                mode 0600 (it holds device tokens, key records, queued sealed payloads and the idempotency secret), \
                never over an existing file, synced to disk, and checked (PRAGMA integrity_check) before this \
                prints what it holds. A PostgreSQL database is backed up with pg_dump instead.

                Example: sealedpush-server gateway backup --config /etc/sealedpush/gateway.json --to /var/backups/gateway-2026-11-27.db
                """)
        @Option(help: ArgumentHelp("The gateway's configuration file (its `database` member names the file to copy).", valueName: "FILE"))
        var config: String
        @Option(name: .customLong("to"), help: ArgumentHelp("The backup file to create; it must not exist.", valueName: "FILE"))
        var destination: String
        @OptionGroup var output: JSONOutputOptions

        func run() async throws {
            let configuration: GatewayConfiguration
            do { configuration = try GatewayConfiguration.load(path: config) } catch {
                throw CLIError("the configuration cannot be used: \(error)")
            }
            let source: String
            switch configuration.database {
            case .postgres:
                throw CLIError("""
                    the database in \(config) (/database) is PostgreSQL: back it up with PostgreSQL's tools, e.g. \
                    `pg_dump --format=custom --file=gateway.dump --dbname=URL` with the URL of /database and the \
                    password from database_password_file (a consistent snapshot while the gateways run); \
                    `gateway backup` copies SQLite databases only
                    """)
            case let .sqlite(path): source = path
            }
            let summary = try Self.backUp(source, to: destination)
            if output.json {
                print(#"{"database":"\#(Self.jsonEscaped(source))","backup":"\#(Self.jsonEscaped(destination))","bytes":\#(summary.bytes),"schema_version":\#(summary.schemaVersion),"messages":\#(summary.messages),"deliveries":\#(summary.deliveries),"queued":\#(summary.queued),"devices":\#(summary.devices)}"#)
            } else {
                print("""
                    backed up \(source) to \(destination): \(summary.bytes) bytes, schema version \(summary.schemaVersion), \
                    \(summary.messages) messages, \(summary.deliveries) deliveries (\(summary.queued) queued), \(summary.devices) devices; \
                    integrity ok
                    """)
            }
        }

        /// What a backup holds, read back from it.
        struct Summary {
            var bytes: Int
            var schemaVersion: Int
            var messages: Int
            var deliveries: Int
            var queued: Int
            var devices: Int
        }

        /// Copies the database at `source` to the new file `destination` (mode 0600) and checks the copy.
        static func backUp(_ source: String, to destination: String) throws -> Summary {
            guard FileManager.default.fileExists(atPath: source) else {
                throw CLIError("there is no database at \(source) (/database in the configuration): the gateway creates it at its first start; check the path")
            }
            // The file first, exclusively and 0600 (VACUUM INTO fills an empty file and keeps its mode): an
            // existing backup is never overwritten, and the copy is never readable by others, whatever the umask.
            let fd = Glibc.open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                let reason = errno
                if reason == EEXIST {
                    throw CLIError("\(destination) (--to) exists: a backup never overwrites a file; choose a new name, or remove the old file first")
                }
                throw CLIError("cannot create \(destination) (--to): \(String(cString: strerror(reason))); check that its directory exists and is writable")
            }
            _ = fchmod(fd, 0o600)
            Glibc.close(fd)
            do {
                try copy(source, into: destination)
                return try check(destination)
            } catch {
                // Never leave a partial or unchecked copy behind under a name that looks like a backup.
                for suffix in ["", "-wal", "-shm", "-journal"] { unlink(destination + suffix) }
                if let error = error as? CLIError { throw error }
                throw CLIError("the backup of \(source) failed and \(destination) was removed: \(error); check the disk space and that the database is readable")
            }
        }

        /// `VACUUM INTO` on a connection of its own: a snapshot under one read transaction (WAL readers see the
        /// last commit and never block the gateway's writer), then the copy synced to disk.
        static func copy(_ source: String, into destination: String) throws {
            var configuration = Configuration()
            // Reads only: never a schema change, never a checkpoint it could avoid; waits out a checkpoint's lock.
            configuration.readonly = true
            configuration.busyMode = .timeout(30)
            configuration.label = "gateway-backup"
            let database = try DatabaseQueue(path: source, configuration: configuration)
            try database.inDatabase { db in try db.execute(sql: "VACUUM INTO ?", arguments: [destination]) }
            try database.close()
            let fd = Glibc.open(destination, O_RDONLY | O_CLOEXEC)
            if fd >= 0 {
                _ = fsync(fd)
                Glibc.close(fd)
            }
            let directory = URL(fileURLWithPath: destination).deletingLastPathComponent().path
            let dirFD = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if dirFD >= 0 {
                _ = fsync(dirFD)
                Glibc.close(dirFD)
            }
        }

        /// Opens the copy (reading only; a connection that can write, so that closing it removes the `-wal` and
        /// `-shm` files SQLite makes beside it): `PRAGMA integrity_check` must answer `ok`; then what it holds.
        static func check(_ path: String) throws -> Summary {
            let database = try DatabaseQueue(path: path)
            defer { try? database.close() }
            return try database.read { db in
                let integrity = try String.fetchAll(db, sql: "PRAGMA integrity_check")
                guard integrity == ["ok"] else {
                    throw CLIError("the copy in \(path) fails SQLite's integrity check (\(integrity.prefix(3).joined(separator: "; "))); it was removed: check the source database with `sqlite3 FILE 'PRAGMA integrity_check'`")
                }
                func count(_ sql: String) throws -> Int { try Int.fetchOne(db, sql: sql) ?? 0 }
                let attributes = try? FileManager.default.attributesOfItem(atPath: path)
                return Summary(bytes: (attributes?[.size] as? Int) ?? 0,
                               schemaVersion: try count("SELECT MAX(version) FROM schema_migrations"),
                               messages: try count("SELECT COUNT(*) FROM messages"),
                               deliveries: try count("SELECT COUNT(*) FROM deliveries"),
                               queued: try count("SELECT COUNT(*) FROM deliveries WHERE state = 'queued'"),
                               devices: try count("SELECT COUNT(*) FROM devices"))
            }
        }

        static func jsonEscaped(_ text: String) -> String {
            var out = ""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out
        }
    }
}
