import Foundation
import GRDB
import Logging
@testable import SealedPushGateway
import Testing

/// A schema as a catalog describes it, in the terms both dialects share.
struct CatalogSchema: Equatable, CustomStringConvertible {
    /// Table → column → "type null|not null" (types: integer, text, bytes, boolean).
    var columns: [String: [String: String]] = [:]
    /// Index name → "table (columns) [unique] [partial]" (the indexes made by a primary key or UNIQUE constraint left out).
    var indexes: [String: String] = [:]

    var description: String {
        columns.keys.sorted().map { t in "\(t): " + columns[t]!.keys.sorted().map { "\($0) \(columns[t]![$0]!)" }.joined(separator: ", ") }
            .joined(separator: "\n") + "\n" + indexes.keys.sorted().map { "\($0): \(indexes[$0]!)" }.joined(separator: "\n")
    }

    /// The schema of the SQLite file at `path`.
    static func sqlite(_ path: String) async throws -> CatalogSchema {
        let db = try DatabaseQueue(path: path)
        defer { try? db.close() }
        return try await db.read { db in
            var schema = CatalogSchema()
            for table in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'") {
                var columns: [String: String] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT name, type, \"notnull\" AS nn, pk FROM pragma_table_info(?)", arguments: [table]) {
                    let type: String = switch (row["type"] as String).uppercased() {
                    case "INTEGER": "integer"
                    case "TEXT": "text"
                    case "BLOB": "bytes"
                    default: row["type"]
                    }
                    let notNull = (row["nn"] as Int) == 1 || (row["pk"] as Int) > 0
                    columns[row["name"]] = type + (notNull ? " not null" : " null")
                }
                schema.columns[table] = columns
            }
            for row in try Row.fetchAll(db, sql: "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL") {
                let name: String = row["name"], sql: String = row["sql"]
                let columns = try String.fetchAll(db, sql: "SELECT name FROM pragma_index_info(?) ORDER BY seqno", arguments: [name])
                schema.indexes[name] = describe(table: row["tbl_name"], columns: columns, unique: sql.uppercased().hasPrefix("CREATE UNIQUE"),
                                                partial: sql.uppercased().contains(" WHERE "))
            }
            return schema
        }
    }

    /// The schema of the PostgreSQL database at `url`.
    static func postgres(_ url: String) async throws -> CatalogSchema {
        let cluster = try await PostgresCluster.shared()
        var schema = CatalogSchema()
        for row in try await cluster.query(url, """
            SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = 'public'
            """) {
            let type = switch row[2] {
            case "bigint", "integer": "integer"
            case "bytea": "bytes"
            default: row[2]
            }
            schema.columns[row[0], default: [:]][row[1]] = type + (row[3] == "NO" ? " not null" : " null")
        }
        for row in try await cluster.query(url, """
            SELECT indexname, tablename, indexdef FROM pg_indexes
            WHERE schemaname = 'public' AND indexname NOT IN (SELECT conname FROM pg_constraint)
            """) {
            let definition = row[2]
            guard let open = definition.range(of: "USING btree ("), let close = definition[open.upperBound...].firstIndex(of: ")") else {
                Issue.record("an index PostgreSQL defines in a way this test does not read: \(definition)")
                continue
            }
            let columns = definition[open.upperBound..<close].split(separator: ",")
                .map { $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }  // "position" is quoted
            schema.indexes[row[0]] = describe(table: row[1], columns: columns, unique: definition.hasPrefix("CREATE UNIQUE"),
                                              partial: definition.contains(" WHERE "))
        }
        return schema
    }

    static func describe(table: String, columns: [String], unique: Bool, partial: Bool) -> String {
        "\(table) (\(columns.joined(separator: ", ")))" + (unique ? " unique" : "") + (partial ? " partial" : "")
    }
}

extension GatewayPostgresSuites {
    /// The two stores' schemas agree (one migration list, the dialect differences named in
    /// `GatewayMigrations.differences`), for a fresh database and for one created by the migrations each store
    /// had before the list was one, migrated forward.
    @Suite("Gateway schema: SQLite and PostgreSQL agree", .serialized, .timeLimit(.minutes(5)))
    struct GatewaySchemaTests {
        static var logger: Logger {
            var logger = Logger(label: "schema-test")
            logger.logLevel = .warning
            return logger
        }

        /// A SQLite file at `version` (migrations applied as the earlier store did), or fresh (nil); opened by the
        /// store (which migrates it forward), then closed: its path.
        static func sqliteFile(at version: Int?) async throws -> String {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-schema-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let path = directory.appendingPathComponent("g.db").path
            if let version {
                let old = try DatabaseQueue(path: path)
                try await old.write { db in
                    try db.execute(sql: "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY NOT NULL, applied_at INTEGER NOT NULL)")
                    for migration in GatewayMigrations.all where migration.version <= version {
                        for statement in migration.sqlite { try db.execute(sql: statement) }
                        try db.execute(sql: "INSERT INTO schema_migrations (version, applied_at) VALUES (?, 1)", arguments: [migration.version])
                    }
                }
                try old.close()
            }
            let store = try await SQLiteGatewayStore.open(path: path, logger: logger)
            await store.close()
            return path
        }

        /// A PostgreSQL database at `version` (as the earlier store's migrations left it), or fresh; opened by the
        /// store, then closed: its URL.
        static func postgresDatabase(at version: Int?) async throws -> String {
            let cluster = try await PostgresCluster.shared()
            let url = try await cluster.makeDatabase()
            if let version {
                var statements: [String] = []
                for migration in GatewayMigrations.all where migration.version <= version {
                    statements += migration.postgres
                    statements.append("INSERT INTO schema_version (version, applied_at) VALUES (\(migration.version), 1)")
                }
                _ = try await cluster.query(url, statements.joined(separator: ";\n"))
            }
            let store = try await PostgresGatewayStore.open(url: url, options: .forTests, logger: logger)
            await store.close()
            return url
        }

        /// `schema` without what `dialect` has on its own (named in `GatewayMigrations.differences`).
        static func shared(_ schema: CatalogSchema, _ dialect: SQLDialect) -> CatalogSchema {
            var schema = schema
            let differences = GatewayMigrations.differences
            for table in differences.tables[dialect] ?? [] {
                #expect(schema.columns.removeValue(forKey: table) != nil, "\(dialect) has no table \(table) any more: update the named differences")
            }
            for (column, _) in differences.columnTypes {
                let parts = column.split(separator: ".").map(String.init)
                if let type = schema.columns[parts[0]]?[parts[1]] { schema.columns[parts[0]]?[parts[1]] = "(\(dialect)) " + type }
            }
            for (index, _) in differences.indexDefinitions {
                #expect(schema.indexes[index] != nil, "\(dialect) has no index \(index) any more: update the named differences")
                schema.indexes[index] = "defined per dialect"
            }
            return schema
        }

        @Test func theSchemasAgreeSaveForTheNamedDifferences() async throws {
            let sqliteFresh = try await CatalogSchema.sqlite(try await Self.sqliteFile(at: nil))
            let postgresFresh = try await CatalogSchema.postgres(try await Self.postgresDatabase(at: nil))
            // The column types named as differences are compared apart: each says its dialect.
            var sqlite = Self.shared(sqliteFresh, .sqlite), postgres = Self.shared(postgresFresh, .postgres)
            for (column, types) in GatewayMigrations.differences.columnTypes {
                let parts = column.split(separator: ".").map(String.init)
                #expect(sqlite.columns[parts[0]]?[parts[1]]?.hasPrefix("(sqlite) \(types.sqlite) ") == true, "\(column)")
                #expect(postgres.columns[parts[0]]?[parts[1]]?.hasPrefix("(postgres) \(types.postgres) ") == true, "\(column)")
                sqlite.columns[parts[0]]?[parts[1]] = "named"
                postgres.columns[parts[0]]?[parts[1]] = "named"
            }
            #expect(Set(sqlite.columns.keys) == Set(postgres.columns.keys))
            for table in Set(sqlite.columns.keys).intersection(postgres.columns.keys) {
                #expect(sqlite.columns[table] == postgres.columns[table], "table \(table)")
            }
            #expect(Set(sqlite.indexes.keys) == Set(postgres.indexes.keys))
            for index in Set(sqlite.indexes.keys).intersection(postgres.indexes.keys) {
                #expect(sqlite.indexes[index] == postgres.indexes[index], "index \(index)")
            }

            // Databases the earlier stores created (SQLite at v6, PostgreSQL at v2: what they had when the lists were
            // two) end with the same schema as fresh ones.
            #expect(try await CatalogSchema.sqlite(try await Self.sqliteFile(at: 6)) == sqliteFresh)
            #expect(try await CatalogSchema.postgres(try await Self.postgresDatabase(at: 2)) == postgresFresh)
        }
    }
}
