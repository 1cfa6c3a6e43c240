import Testing
import Foundation
import SealedPushTestSupport
import SealedPushWire

/// `sealedpush-bench --json --quick` (the benchmark target, built beside this test bundle) runs and prints
/// the documented JSON shape. It never checks
/// timings: a shared, loaded test machine says nothing about performance.
@Suite("CLI: bench", .serialized, .timeLimit(.minutes(20)))
struct BenchCLITests {
    /// The benchmark binary: `$SEALEDPUSH_BENCH_BIN`, else beside the test bundle (`swift build --build-tests`
    /// in Benchmarks/ puts it there).
    static var bench: URL {
        if let env = ProcessInfo.processInfo.environment["SEALEDPUSH_BENCH_BIN"], !env.isEmpty { return URL(fileURLWithPath: env) }
        return Bundle.main.bundleURL.appendingPathComponent("sealedpush-bench")
    }

    @Test("bench --json --quick prints results with name, ops_per_second and ratio_to_raw")
    func quickJSONShape() throws {
        // The device-push memory child is `sealedpush`, which this package does not build: name the Apps
        // package's (ProjectPaths: $SEALEDPUSH_BIN, else beside this bundle, else Apps/.build).
        let r = try ChildProcess.run(Self.bench, ["--json", "--quick"], environment: ["SEALEDPUSH_BIN": ProjectPaths.sealedpushBinary.path],
                                     timeout: 300)
        try #require(r.status == 0, "bench failed: \(r.stderr)")
        guard case let .object(root) = try JSON.parse(r.stdout) else {
            Issue.record("the output is not a JSON object: \(r.stdoutText.prefix(300))")
            return
        }
        guard case let .array(results)? = root["results"] else {
            Issue.record("no \"results\" array")
            return
        }
        var names: [String] = []
        for value in results {
            let result = try #require(value.objectValue, "a result is not an object")
            let name = try #require(result["name"]?.stringValue, "a result has no name")
            names.append(name)
            for key in ["ops_per_second", "ratio_to_raw"] {
                switch result[key] {
                case .double?, .int?: break
                default: Issue.record("\(name): \"\(key)\" is missing or not a number")
                }
            }
        }
        for expected in ["raw_seal", "raw_open", "sender_seal_unsigned", "sender_seal_signed", "sender_batch_unsigned",
                         "sender_batch_signed"] {
            #expect(names.contains(expected), "missing result \(expected)")
        }
        #expect(names.contains { $0.hasPrefix("receiver_open_warm_") }, "no warm receiver result")
        #expect(names.contains { $0.hasPrefix("receiver_open_cold_") }, "no cold receiver result")
        #expect(Set(names).count == names.count, "duplicate result names")

        guard case let .array(targets)? = root["targets"] else {
            Issue.record("no \"targets\" array")
            return
        }
        #expect(!targets.isEmpty)
        for target in targets {
            let t = try #require(target.objectValue)
            #expect(t["name"]?.stringValue != nil)
            if case .bool? = t["met"] {} else { Issue.record("a target has no boolean \"met\"") }
        }
        let memory = try #require(root["memory"]?.objectValue, "no \"memory\" object")
        #expect(memory["device_push_outcome"]?.stringValue == "decrypted", "the device push child did not decrypt")
    }

    @Test("bench --profile runs one workload untimed, and names the workloads for an unknown one")
    func profileWorkload() throws {
        let r = try ChildProcess.run(Self.bench, ["--profile", "sender_seal_signed", "--iterations", "50"])
        #expect(r.status == 0, "bench --profile failed: \(r.stderr)")
        let unknown = try ChildProcess.run(Self.bench, ["--profile", "no_such_workload", "--iterations", "1"])
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("unknown workload no_such_workload") && unknown.stderr.contains("raw_seal"))
    }
}
