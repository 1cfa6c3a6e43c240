import Testing
import Foundation
import SealedPushTestSupport
import SealedPushWire

/// `sealedpush-memory-bench --json --quick` (built beside this test bundle) runs every scenario and prints the
/// documented JSON shape. It never checks the figures against the targets: a quick run's attachments are small,
/// and a debug build's counter does not see the shared libraries' allocations.
@Suite("CLI: memory bench", .serialized, .timeLimit(.minutes(20)))
struct MemoryBenchCLITests {
    /// The benchmark binary: `$SEALEDPUSH_MEMORY_BENCH_BIN`, else beside the test bundle.
    static var memoryBench: URL {
        if let env = ProcessInfo.processInfo.environment["SEALEDPUSH_MEMORY_BENCH_BIN"], !env.isEmpty { return URL(fileURLWithPath: env) }
        return Bundle.main.bundleURL.appendingPathComponent("sealedpush-memory-bench")
    }

    static let scenarios: [String: String] = [
        "text": "decrypted", "reveal_hold": "held", "reveal_open": "revealed", "media_4x2500k": "decrypted", "media_10m_plus_3x100k": "decrypted",
        "worst_case": "decrypted",
    ]

    @Test("memory bench --json --quick: every scenario with its outcome, cold and warm figures, and a target each")
    func quickJSONShape() throws {
        let r = try ChildProcess.run(Self.memoryBench, ["--json", "--quick"], timeout: 300)
        try #require(r.status == 0, "memory bench failed: \(r.stderr)")
        let root = try #require(try JSON.parse(r.stdout).objectValue, "the output is not a JSON object: \(r.stdoutText.prefix(300))")
        guard case let .array(scenarios)? = root["scenarios"] else {
            Issue.record("no \"scenarios\" array")
            return
        }
        var seen: [String] = []
        for value in scenarios {
            let s = try #require(value.objectValue, "a scenario is not an object")
            let name = try #require(s["name"]?.stringValue, "a scenario has no name")
            seen.append(name)
            #expect(s["outcome"]?.stringValue == Self.scenarios[name], "\(name): outcome \(String(describing: s["outcome"]))")
            #expect((s["limit_bytes"]?.intValue ?? 0) > 0, "\(name): no limit_bytes")
            if case .bool? = s["heap_counter_complete"] {} else { Issue.record("\(name): no boolean heap_counter_complete") }
            for phase in ["cold", "warm"] {
                let figures = try #require(s[phase]?.objectValue, "\(name): no \(phase) object")
                for key in ["heap_bytes", "anonymous_bytes", "allocations"] {
                    #expect(figures[key]?.intValue != nil, "\(name).\(phase): \(key) is missing or not an integer")
                }
            }
            #expect((s["process_peak_rss_bytes"]?.intValue ?? 0) > 0, "\(name): no process peak RSS")
            if name.hasPrefix("media_") || name == "worst_case" {
                #expect(s["attachments_attached"]?.intValue == 4, "\(name): not every attachment was attached")
            }
            if name == "worst_case" {
                // Both instances' maintenance ran before their handlers: the full outbox was sent, each entry once.
                guard case let .array(runs)? = s["maintenance"], let done = runs.first?.stringValue else {
                    Issue.record("worst_case: no maintenance array")
                    continue
                }
                #expect(done.contains("0 left in the outbox"), "worst_case: \(done)")
                #expect(s["limit_bytes"]?.intValue.map { Int($0) } == Int(12 * 1_048_576))
            }
        }
        #expect(seen.sorted() == Self.scenarios.keys.sorted(), "scenarios \(seen)")

        guard case let .array(targets)? = root["targets"] else {
            Issue.record("no \"targets\" array")
            return
        }
        #expect(targets.count == Self.scenarios.count)
        for target in targets {
            let t = try #require(target.objectValue)
            #expect(t["name"]?.stringValue != nil && t["detail"]?.stringValue != nil)
            if case .bool? = t["met"] {} else { Issue.record("a target has no boolean \"met\"") }
        }
        #expect(root["method"]?.objectValue?["heap"]?.stringValue != nil, "no method.heap")
    }

    @Test("an unknown scenario is refused, naming the scenarios")
    func unknownScenario() throws {
        let r = try ChildProcess.run(Self.memoryBench, ["--child", "no_such_scenario", "--fixtures", "/nonexistent"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("text") && r.stderr.contains("media_4x2500k"), "\(r.stderr)")
    }
}
