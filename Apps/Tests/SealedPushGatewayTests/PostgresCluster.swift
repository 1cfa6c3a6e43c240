import Foundation
import NIOConcurrencyHelpers
@testable import SealedPushGateway

/// Why the throwaway PostgreSQL could not be started; says what to do.
struct PostgresClusterError: Error, CustomStringConvertible {
    let description: String
}

/// A throwaway PostgreSQL cluster for the tests: `initdb` into a temporary directory owned by the `postgres`
/// user (PostgreSQL refuses to run as root), a server on a free loopback port with trust authentication,
/// stopped when the test process exits (and, should the process die, by a watchdog that waits for it).
/// One per test process: `shared()` starts it on first use; each test makes a database of its own.
final class PostgresCluster: Sendable {
    let bin: String
    let directory: String
    let port: Int
    var dataDirectory: String { directory + "/data" }

    static let state = NIOLockedValueBox<Result<PostgresCluster, PostgresClusterError>?>(nil)

    /// The cluster of this test process, started on first use.
    static func shared() async throws -> PostgresCluster {
        try await offPool {
            try state.withLockedValue { s in
                if s == nil {
                    s = Result { () throws(PostgresClusterError) -> PostgresCluster in try PostgresCluster.start() }
                    if case .success = s { atexit { PostgresCluster.state.withLockedValue { s in try? s?.get().stop() } } }
                }
                return try s!.get()
            }
        }
    }

    private init(bin: String, directory: String, port: Int) {
        self.bin = bin
        self.directory = directory
        self.port = port
    }

    /// The PostgreSQL server binaries: version 15 (Debian 12's), else the newest installed.
    static func findBinaries() throws(PostgresClusterError) -> String {
        let root = "/usr/lib/postgresql"
        var candidates = ["\(root)/15/bin"]
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted(by: >)
        candidates += versions.map { "\(root)/\($0)/bin" }
        for dir in candidates where FileManager.default.isExecutableFile(atPath: dir + "/initdb") && FileManager.default.isExecutableFile(atPath: dir + "/pg_ctl") {
            return dir
        }
        throw PostgresClusterError(description: "PostgreSQL's server binaries (initdb, pg_ctl) are not in \(root)/15/bin nor any \(root)/N/bin; the PostgreSQL tests need them: apt-get install postgresql")
    }

    static func start() throws(PostgresClusterError) -> PostgresCluster {
        let bin = try findBinaries()
        guard getpwnam("postgres") != nil else {
            throw PostgresClusterError(description: "there is no `postgres` system user to run the test cluster as; apt-get install postgresql creates it")
        }
        let directory = "/tmp/sealedpush-pg-\(UUID().uuidString.prefix(8))"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw PostgresClusterError(description: "cannot create \(directory): \(error)")
        }
        let port: Int
        do { port = try GatewayHarness.freePort() } catch { throw PostgresClusterError(description: "no free loopback port: \(error)") }
        let cluster = PostgresCluster(bin: bin, directory: directory, port: port)
        try run(["/bin/chown", "postgres:postgres", directory])
        try run(["/bin/chmod", "700", directory])
        try cluster.asPostgres(["\(bin)/initdb", "-D", cluster.dataDirectory, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"])
        try cluster.startServer()
        // Should this process die without stopping it, the server stops when the process is gone.
        _ = try? spawn(["/bin/sh", "-c", """
            while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done
            runuser -u postgres -- '\(bin)/pg_ctl' -D '\(cluster.dataDirectory)' stop -m immediate >/dev/null 2>&1
            rm -rf '\(directory)'
            """], in: "/", output: "/dev/null")
        return cluster
    }

    func startServer() throws(PostgresClusterError) {
        try asPostgres(["\(bin)/pg_ctl", "-D", dataDirectory, "-l", directory + "/server.log", "-w", "-t", "60", "-o",
                        "-c listen_addresses=127.0.0.1 -p \(port) -k \(directory) -c fsync=off -c max_connections=200", "start"])
    }

    /// Restarts the server (`-m fast`: open connections are cut, as in a database restart or failover).
    func restart() async throws {
        try await offPool { [self] in
            try asPostgres(["\(bin)/pg_ctl", "-D", dataDirectory, "-m", "fast", "-w", "-t", "60", "stop"])
            try startServer()
        }
    }

    /// Stops the server at once and removes its directory.
    func stop() throws {
        try asPostgres(["\(bin)/pg_ctl", "-D", dataDirectory, "-m", "immediate", "-w", "-t", "30", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A new empty database; its URL.
    func makeDatabase() async throws -> String {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        try await offPool { [self] in
            try asPostgres(["\(bin)/createdb", "-h", directory, "-p", "\(port)", "-U", "postgres", name])
        }
        return "postgres://postgres@127.0.0.1:\(port)/\(name)?sslmode=disable"
    }

    func asPostgres(_ arguments: [String]) throws(PostgresClusterError) {
        _ = try Self.run(["/usr/sbin/runuser", "-u", "postgres", "--"] + arguments, in: directory)
    }

    /// The rows `sql` answers in the database of `url` (a URL from `makeDatabase()`), each a list of its columns
    /// as text (`psql -At`), read past the gateways: what a test asks of the tables themselves.
    func query(_ url: String, _ sql: String) async throws -> [[String]] {
        let name = String(url.split(separator: "/").last!.split(separator: "?").first!)
        let text = try await offPool { [self] in
            try Self.run(["/usr/sbin/runuser", "-u", "postgres", "--", "\(bin)/psql", "-h", directory, "-p", "\(port)", "-U", "postgres",
                          "-d", name, "-At", "-F", "\t", "-c", sql], in: directory)
        }
        return text.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
    }

    /// Runs a command to its end; its output, or throws with it when it fails.
    ///
    /// Spawned directly and reaped with `waitpid`, not through Foundation's `Process`: `Process` learns that a
    /// child ended when a descriptor it hands down is closed, and the server `pg_ctl` starts would inherit it.
    /// For the same reason the command runs with every descriptor but 0–2 closed.
    @discardableResult
    static func run(_ arguments: [String], in directory: String = "/") throws(PostgresClusterError) -> String {
        let outputPath = NSTemporaryDirectory() + "pg-cmd-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let pid = try spawn(arguments, in: directory, output: outputPath)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { throw PostgresClusterError(description: "cannot wait for \(arguments[0]) (errno \(errno))") }
        }
        let exited = status & 0x7f == 0
        let code = (status >> 8) & 0xff
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        guard exited, code == 0 else {
            throw PostgresClusterError(description: "\(arguments.joined(separator: " ")) \(exited ? "exited \(code)" : "was killed"): \(text.suffix(2000))")
        }
        return text
    }

    /// Starts `arguments` in `directory` with stdin from /dev/null and stdout and stderr into `output`; its pid.
    static func spawn(_ arguments: [String], in directory: String, output: String) throws(PostgresClusterError) -> pid_t {
        let script = #"for f in /proc/$$/fd/*; do n=${f##*/}; if [ "$n" -gt 2 ]; then eval "exec $n>&-"; fi; done 2>/dev/null; cd "$1" && shift && exec "$@""#
        let argv = ["/bin/bash", "-c", script, "bash", directory] + arguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let cArguments = argv.map { strdup($0) } + [nil]
        defer { for a in cArguments { free(a) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, "/bin/bash", &actions, nil, cArguments, environ)
        guard rc == 0 else {
            throw PostgresClusterError(description: "cannot run \(arguments[0]) (error \(rc)); the PostgreSQL tests need it (apt-get install postgresql)")
        }
        return pid
    }
}

extension PostgresGatewayStore.Options {
    /// The defaults, but a start (connect and migrate) that may take up to 120 s and operations that may take 60 s: at
    /// the start of a full run under a sanitizer every suite starts at once; migrations took more than the production
    /// 20 s once, and an operation (waiting for a pooled connection included) more than the production 15 + 5 s once.
    /// Tests of the deadlines themselves set their own.
    static var forTests: Self {
        var options = Self()
        options.startTimeout = .seconds(120)
        options.statementTimeout = .seconds(55)
        return options
    }
}
