import ArgumentParser
import CHeapCount
import Foundation
import SealedPushWire

/// `sealedpush-memory-bench`: the heap the receiver uses for one text message, a reveal, and a 10 MB image in 4
/// attachments, each in a fresh process, against the extension budgets (docs/benchmarks.md, "The receiver's heap").
@main
struct MemoryBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sealedpush-memory-bench",
        abstract: "Measure the heap the notification extensions use per message, against their memory budgets.",
        discussion: """
            Each scenario runs in a fresh process (this executable again) that reads its inputs from files the \
            parent made, then runs the operation twice: cold (the first time in the process) and warm. For each \
            run it counts the bytes live in malloc — every malloc, calloc, realloc, posix_memalign, aligned_alloc \
            and free of the process goes through counting wrappers (the linker's --wrap; complete in a static \
            executable) — and libsodium's guarded pages, and reports the peak during the operation over what was \
            live before it. Beside it: the peak anonymous resident size during the operation (/proc/self/statm \
            sampled every 100 µs, over its value before), and the process's peak RSS (VmHWM).

              text                     one text message, SecretMessageExtension.didReceive
              reveal_hold              a reveal message held by the service extension
              reveal_open              the held message opened by RevealContentExtension (press and hold)
              media_4x2500k            a 10 MB image as 4 attachments of 2.5 MB, fetched in parallel
              media_10m_plus_3x100k    one 10 MB image and 3 of 100 kB, fetched in parallel
              worst_case               two requests at once in one process (the 4 x 2.5 MB image and a text), \
            the receipt outbox and the pending queue full, each instance's maintenance before its handler

            Targets: one text message (and each half of a reveal) <= 2 MiB; the 10 MB image <= 8 MiB; the worst case <= 12 MiB; judged on \
            the larger of the cold heap and the cold anonymous growth, worst of the runs.

            With --json: {"scenarios": [{"name", "limit_bytes", "cold", "warm", ...}], "targets": [{"name", "met", \
            "detail"}], "method": {...}, "environment": {...}}.
            """)

    @Flag(name: .long, help: "Print JSON instead of a table.")
    var json = false

    @Flag(name: .long, help: "Small attachments and one run: checks that everything runs; figures are meaningless.")
    var quick = false

    @Option(name: .long, help: "Fresh processes per scenario (the worst is reported).")
    var runs = 3

    @Option(name: .customLong("child"), help: ArgumentHelp("Run one scenario in this process (internal).", visibility: .hidden))
    var child: String?

    @Option(name: .customLong("fixtures"), help: ArgumentHelp("The fixtures directory of --child (internal).", visibility: .hidden))
    var fixtures: String?

    func run() async throws {
        if let child {
            guard let scenario = Scenario(rawValue: child), let fixtures else {
                throw ValidationError("--child takes one of \(Scenario.allCases.map(\.rawValue).joined(separator: ", ")) and --fixtures")
            }
            let result = try await ScenarioRun(scenario: scenario, fixtures: Fixtures(directory: fixtures), quick: quick).run()
            print(String(decoding: JSON.serialize(.object(result)), as: UTF8.self))
            return
        }
        let report = try await MemoryBenchRun(quick: quick, runs: quick ? 1 : max(1, runs), progress: true).run()
        if json {
            print(String(decoding: JSON.serialize(.object(report.jsonObject)), as: UTF8.self))
        } else {
            print(report.text)
        }
    }
}

/// The parent: fixtures, one child process per scenario and run, the worst figures, the targets.
struct MemoryBenchRun {
    let quick: Bool
    let runs: Int
    let progress: Bool

    struct Target {
        let name: String
        let met: Bool
        let detail: String
    }

    struct Report {
        var scenarios: [JSONValue] = []
        var targets: [Target] = []
        var lines: [String] = []
        var method = JSONObject()
        var environment = JSONObject()

        var jsonObject: JSONObject {
            JSONObject([
                ("scenarios", .array(scenarios)),
                ("targets", .array(targets.map { .object(JSONObject([("name", .string($0.name)), ("met", .bool($0.met)), ("detail", .string($0.detail))])) })),
                ("method", .object(method)), ("environment", .object(environment)),
            ])
        }

        var text: String {
            var out = ["receiver memory (heap = the most bytes held at once by the blocks the operation allocated; anon = peak anonymous RSS growth, sampled):"]
            out += lines
            out.append("")
            out.append("targets:")
            for t in targets { out.append("  [\(t.met ? "met" : "NOT met")] \(t.name): \(t.detail)") }
            if environment["mode"] == .string("quick") {
                out.append("")
                out.append("note: --quick: small attachments and one run; the figures and targets are not meaningful")
            }
            return out.joined(separator: "\n")
        }
    }

    func say(_ text: String) {
        if progress { FileHandle.standardError.write(Data(("memory bench: " + text + "\n").utf8)) }
    }

    func run() async throws -> Report {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("sealedpush-memory-bench-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: base) }
        say("fixtures in \(base)")
        _ = try await Fixtures.make(in: base, quick: quick, say: say)
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]

        var report = Report()
        var complete = true
        for scenario in Scenario.allCases {
            var results: [JSONObject] = []
            for run in 1...runs {
                say("\(scenario.rawValue), run \(run) of \(runs)")
                results.append(try child(me, scenario, fixtures: base))
            }
            let summary = summarize(scenario, results)
            if case .bool(false)? = summary["heap_counter_complete"] { complete = false }
            report.scenarios.append(.object(summary))
            report.lines.append(line(scenario, summary))
            report.targets.append(target(scenario, summary))
        }
        report.method = JSONObject([
            ("heap", .string(complete
                ? "malloc family wrapped at link time (--wrap), usable sizes; the peak held by the blocks the operation allocated; "
                    + "libsodium guarded allocations as the pages they dirty"
                : "incomplete: not a static executable, allocations inside shared libraries are not seen; heap figures are not meaningful")),
            ("anonymous", .string("/proc/self/statm resident minus shared pages, sampled every 100 µs")),
            ("peak_rss", .string("VmHWM of the scenario's process")),
            ("judged_on", .string("the larger of the cold heap and the cold anonymous growth, worst of the runs")),
        ])
        report.environment = JSONObject([
            ("date", .string(Timestamp.format(Date()))), ("runs", .int(Int64(runs))), ("mode", .string(quick ? "quick" : "full")),
            ("page_size", .int(Int64(sysconf(Int32(_SC_PAGESIZE))))), ("online_cpus", .int(Int64(ProcessInfo.processInfo.activeProcessorCount))),
        ])
        return report
    }

    /// Runs `scenario` in a fresh process and returns what it printed (its standard error goes to a file, read
    /// when it failed).
    func child(_ executable: String, _ scenario: Scenario, fixtures: String) throws -> JSONObject {
        let errorPath = fixtures + "/\(scenario.rawValue).stderr"
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        let errors = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
        defer { try? errors.close() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--child", scenario.rawValue, "--fixtures", fixtures] + (quick ? ["--quick"] : [])
        let out = Pipe()
        process.standardOutput = out
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0, case let .object(result) = try? JSON.parse([UInt8](output)) else {
            let message = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
            throw MemoryBenchFailure("\(scenario.rawValue): the measuring process failed (status \(process.terminationStatus)): \(message.suffix(600))")
        }
        return result
    }

    /// The worst of the runs, figure by figure, and the cold heap of every run.
    func summarize(_ scenario: Scenario, _ results: [JSONObject]) -> JSONObject {
        func int(_ o: JSONObject, _ key: String, _ inner: String? = nil) -> Int64 {
            guard let inner else { return o[key]?.intValue ?? 0 }
            return o[key]?.objectValue?[inner]?.intValue ?? 0
        }
        func worst(_ key: String, _ inner: String? = nil) -> JSONValue { .int(results.map { int($0, key, inner) }.max() ?? 0) }
        func phase(_ name: String) -> JSONValue {
            .object(JSONObject([("heap_bytes", worst(name, "heap_bytes")), ("heap_retained_bytes", worst(name, "heap_retained_bytes")),
                                ("process_heap_growth_bytes", worst(name, "process_heap_growth_bytes")),
                                ("heap_untracked_blocks", worst(name, "heap_untracked_blocks")),
                                ("anonymous_bytes", worst(name, "anonymous_bytes")), ("allocations", worst(name, "allocations")),
                                ("process_anonymous_peak_bytes", worst(name, "process_anonymous_peak_bytes")),
                                ("process_peak_rss_bytes", worst(name, "process_peak_rss_bytes"))]))
        }
        let complete = results.allSatisfy { $0["heap_counter_complete"] == .bool(true) }
        return JSONObject([
            ("name", .string(scenario.rawValue)), ("description", .string(scenario.summary)), ("limit_bytes", .int(Int64(scenario.limitBytes))),
            ("runs", .int(Int64(results.count))), ("outcome", results.first?["outcome"] ?? .null), ("heap_counter_complete", .bool(complete)),
            ("main_thread_parked_before", .bool(results.allSatisfy { $0["main_thread_parked_before"] == .bool(true) })),
            ("cold", phase("cold")), ("warm", phase("warm")),
            ("cold_heap_bytes_each_run", .array(results.map { .int(int($0, "cold", "heap_bytes")) })),
            ("guarded_bytes", worst("guarded_bytes")),
            ("process_peak_rss_bytes", worst("peak_rss_bytes")),
            ("process_anonymous_peak_bytes", worst("anonymous_peak_bytes")),
            ("process_rss_before_bytes", worst("rss_before_bytes")),
            ("process_anonymous_before_bytes", worst("anonymous_before_bytes")),
            ("counter_live_bytes_before", worst("counter_live_bytes_before")),
            ("counter_live_bytes_at_end", .array(results.map { .int(int($0, "counter_live_bytes")) })),
            ("glibc_in_use_bytes_at_end", .array(results.map { .int(int($0, "glibc_in_use_bytes")) })),
            ("attachments_attached", results.first?["attachments_attached"] ?? .null),
            ("attachments_in_flight_max", .int(results.map { int($0, "attachments_in_flight_max") }.min() ?? 0)),
            ("maintenance", results.first?["maintenance"] ?? .null),
        ])
    }

    static func mib(_ bytes: Int64) -> String { String(format: "%.2f MiB", Double(bytes) / 1_048_576) }
    static func kib(_ bytes: Int64) -> String { bytes < 1_048_576 ? "\((bytes + 512) / 1024) KiB" : mib(bytes) }

    /// The figure a target is judged on: the larger of the cold heap and the cold anonymous growth.
    static func judged(_ summary: JSONObject) -> Int64 {
        let cold = summary["cold"]?.objectValue
        return max(cold?["heap_bytes"]?.intValue ?? 0, cold?["anonymous_bytes"]?.intValue ?? 0)
    }

    func line(_ scenario: Scenario, _ s: JSONObject) -> String {
        func figure(_ phase: String, _ key: String) -> Int64 { s[phase]?.objectValue?[key]?.intValue ?? 0 }
        let heap = s["heap_counter_complete"] == .bool(true)
            ? "heap \(Self.kib(figure("cold", "heap_bytes"))) cold, \(Self.kib(figure("warm", "heap_bytes"))) warm;" : "heap unmeasured;"
        var text = "  \(scenario.rawValue): " + heap
            + " anon +\(Self.kib(figure("cold", "anonymous_bytes"))) cold, +\(Self.kib(figure("warm", "anonymous_bytes"))) warm;"
            + " process after one message: peak RSS \(Self.mib(figure("cold", "process_peak_rss_bytes"))),"
            + " anonymous \(Self.mib(figure("cold", "process_anonymous_peak_bytes")))"
        if scenario.isMedia || scenario == .worstCase { text += "; \(s["attachments_in_flight_max"]?.intValue ?? 0) attachments in flight at once" }
        if case let .array(done)? = s["maintenance"], let cold = done.first?.stringValue { text += "; maintenance (cold): " + cold }
        return text
    }

    func target(_ scenario: Scenario, _ s: JSONObject) -> Target {
        let limit = Int64(scenario.limitBytes)
        let name: String
        switch scenario {
        case .text: name = "one text message (service extension) heap <= 2 MiB"
        case .revealHold: name = "reveal held by the service extension heap <= 2 MiB (the text target)"
        case .revealOpen: name = "reveal opened by the content extension heap <= 2 MiB (the text target)"
        case .media4x: name = "10 MB image as 4 attachments of 2.5 MB in parallel heap <= 8 MiB"
        case .media1plus3: name = "10 MB image beside 3 small attachments in parallel heap <= 8 MiB"
        case .worstCase: name = "worst case: 2 requests at once (4 x 2.5 MB attachments; a text), full outbox and pending queue, heap <= 12 MiB"
        }
        guard s["heap_counter_complete"] == .bool(true) else {
            return Target(name: name, met: false, detail: "unmeasured: the heap counter does not see every allocation (not a static executable)")
        }
        let judged = Self.judged(s)
        let cold = s["cold"]?.objectValue
        let detail = "\(Self.kib(judged)) (heap \(Self.kib(cold?["heap_bytes"]?.intValue ?? 0)), anon +\(Self.kib(cold?["anonymous_bytes"]?.intValue ?? 0)),"
            + " cold, worst of \(runs)); the process's peak RSS \(Self.mib(cold?["process_peak_rss_bytes"]?.intValue ?? 0))"
        return Target(name: name, met: judged <= limit, detail: detail)
    }
}
