import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Timing, pinning and memory probes for `sealedpush bench`.
enum BenchHarness {
    /// How long and how often each figure is measured.
    struct Plan: Sendable {
        /// Untimed running before the rounds (caches, branch predictors, lazy initialisation).
        var warmup: Duration
        /// Length of one timed round.
        var round: Duration
        /// Timed rounds; an ops/s figure is the fastest round (the one least disturbed by other processes).
        var rounds: Int
        /// Never fewer iterations than this in a round.
        var minimumIterations: Int

        static let full = Plan(warmup: .milliseconds(50), round: .milliseconds(40), rounds: 15, minimumIterations: 20)
        static let quick = Plan(warmup: .zero, round: .zero, rounds: 1, minimumIterations: 3)
    }

    /// The outcome of measuring one figure.
    struct Measurement: Sendable {
        /// Operations per second of the fastest round.
        let opsPerSecond: Double
        /// Operations per second of every round, in order.
        let rounds: [Double]
        /// Iterations in each round.
        let iterationsPerRound: Int
    }

    /// Warms `body` up for `plan.warmup` and returns the iterations one round of `plan.round` takes.
    static func calibrate(_ plan: Plan, _ body: (Int) throws -> Void) rethrows -> Int {
        let clock = ContinuousClock()
        var done = 0, batch = 1
        var spent = Duration.zero
        repeat {
            let start = clock.now
            try body(batch)
            spent += clock.now - start
            done += batch
            batch = min(batch * 2, 4096)
        } while spent < plan.warmup
        let perOp = max(seconds(spent) / Double(done), 1e-9)
        return max(plan.minimumIterations, Int((seconds(plan.round) / perOp).rounded()))
    }

    /// Measures `body(n)`, which must perform `n` operations; the per-round iteration count is
    /// calibrated from the warm-up so a round lasts about `plan.round`.
    static func measure(_ plan: Plan, _ body: (Int) throws -> Void) rethrows -> Measurement {
        let clock = ContinuousClock()
        let iterations = try calibrate(plan, body)
        var rates: [Double] = []
        for _ in 0..<max(plan.rounds, 1) {
            let start = clock.now
            try body(iterations)
            let elapsed = seconds(clock.now - start)
            rates.append(Double(iterations) / max(elapsed, 1e-9))
        }
        return Measurement(opsPerSecond: rates.max() ?? 0, rounds: rates, iterationsPerRound: iterations)
    }

    /// Measures `work` and `floor` in alternating rounds (floor, work, floor, work, …), so both figures
    /// come from the same stretch of time. The ops/s figures are the fastest of their rounds; the
    /// ratio is the median of the per-pair ratios (each work round over the floor round just before
    /// it), which a burst of load on one side of one pair cannot move.
    static func measurePaired(_ plan: Plan, floor: (Int) throws -> Void, work: (Int) throws -> Void) rethrows
        -> (work: Double, floor: Double, ratio: Double) {
        let clock = ContinuousClock()
        let floorIterations = try calibrate(plan, floor)
        let workIterations = try calibrate(plan, work)
        var bestFloor = 0.0, bestWork = 0.0
        var ratios: [Double] = []
        for _ in 0..<max(plan.rounds, 1) {
            var start = clock.now
            try floor(floorIterations)
            let floorRate = Double(floorIterations) / max(seconds(clock.now - start), 1e-9)
            start = clock.now
            try work(workIterations)
            let workRate = Double(workIterations) / max(seconds(clock.now - start), 1e-9)
            bestFloor = max(bestFloor, floorRate)
            bestWork = max(bestWork, workRate)
            ratios.append(workRate / floorRate)
        }
        ratios.sort()
        let median = ratios.count % 2 == 1 ? ratios[ratios.count / 2] : (ratios[ratios.count / 2 - 1] + ratios[ratios.count / 2]) / 2
        return (bestWork, bestFloor, median)
    }

    /// A `Duration` in seconds.
    static func seconds(_ d: Duration) -> Double {
        let c = d.components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }

    // MARK: - Memory

    /// A `kB` field of `/proc/self/status` (`VmRSS`, `VmHWM`), in bytes; `nil` where unavailable.
    static func procStatus(_ field: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let digits = line.dropFirst(field.count + 1).filter(\.isNumber)
            return Int(digits).map { $0 * 1024 }
        }
        return nil
    }

    /// The peak resident memory of one child run, and how it was measured.
    struct ChildRun: Sendable {
        let peakBytes: Int?
        let method: String
        let status: Int32
        let stdout: String
    }

    /// Runs `executable arguments` and reports its peak resident set size.
    ///
    /// With `/usr/bin/time` the child is measured alone (GNU time forks, so the count starts from its
    /// own small image). Without it, `getrusage(RUSAGE_CHILDREN)` is used; on Linux a child started
    /// with `posix_spawn` (vfork) can inherit this process's high-water mark, so that is an upper bound.
    static func peakMemory(of executable: String, _ arguments: [String]) throws -> ChildRun {
        let timeTool = "/usr/bin/time"
        let useTime = FileManager.default.isExecutableFile(atPath: timeTool)
        let process = Process()
        let out = Pipe(), err = Pipe()
        if useTime {
            process.executableURL = URL(fileURLWithPath: timeTool)
            process.arguments = ["-f", "SEALEDPUSH_BENCH_MAXRSS_KB=%M", executable] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        }
        var environment = ProcessInfo.processInfo.environment
        environment["SEALEDPUSH_LOG_LEVEL"] = "error"
        process.environment = environment
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let stdout = String(decoding: outData, as: UTF8.self)
        if useTime {
            let text = String(decoding: errData, as: UTF8.self)
            let line = text.split(separator: "\n").last { $0.hasPrefix("SEALEDPUSH_BENCH_MAXRSS_KB=") }
            let kb = line.flatMap { Int($0.dropFirst("SEALEDPUSH_BENCH_MAXRSS_KB=".count)) }
            return ChildRun(peakBytes: kb.map { $0 * 1024 }, method: "/usr/bin/time (GNU time, fork+exec)",
                            status: process.terminationStatus, stdout: stdout)
        }
        #if canImport(Glibc)
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_CHILDREN.rawValue), &usage)
        return ChildRun(peakBytes: Int(usage.ru_maxrss) * 1024, method: "getrusage(RUSAGE_CHILDREN) (upper bound)",
                        status: process.terminationStatus, stdout: stdout)
        #else
        return ChildRun(peakBytes: nil, method: "unavailable", status: process.terminationStatus, stdout: stdout)
        #endif
    }

    /// Anonymous resident memory of a child, from `/proc/PID/smaps_rollup`.
    struct PrivateMemory {
        var anonymous: Int?
    }

    /// Starts `executable arguments` (a delivery held up by `--extension-delay`), reads its
    /// `smaps_rollup` 300 ms in, and waits for it to finish.
    static func privateMemoryDuringStall(of executable: String, _ arguments: [String]) throws -> PrivateMemory {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        Thread.sleep(forTimeInterval: 0.3)
        var memory = PrivateMemory()
        if let text = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/smaps_rollup", encoding: .utf8) {
            func field(_ name: String) -> Int? {
                guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
                return line.split(separator: " ").compactMap { Int($0) }.first.map { $0 * 1024 }
            }
            memory = PrivateMemory(anonymous: field("Anonymous"))
        }
        process.waitUntilExit()
        return memory
    }

    /// The `sealedpush` binary built beside this one (`$SEALEDPUSH_BIN` overrides it), whose
    /// `device push` the memory figures measure.
    static var sealedpushExecutable: String {
        if let path = ProcessInfo.processInfo.environment["SEALEDPUSH_BIN"], !path.isEmpty { return path }
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("sealedpush").path
    }

    /// A fresh 0700 temporary directory, in `/dev/shm` when available (the keychain store fsyncs on
    /// every write, which would make generating 1000 retired keys slow on a disk).
    static func temporaryDirectory() throws -> URL {
        var isDirectory: ObjCBool = false
        let shm = "/dev/shm"
        let base: URL
        if FileManager.default.fileExists(atPath: shm, isDirectory: &isDirectory), isDirectory.boolValue,
           FileManager.default.isWritableFile(atPath: shm) {
            base = URL(fileURLWithPath: shm)
        } else {
            base = FileManager.default.temporaryDirectory
        }
        let dir = base.appendingPathComponent("sealedpush-bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return dir
    }
}
