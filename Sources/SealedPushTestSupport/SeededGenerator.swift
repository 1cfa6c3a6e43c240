import Foundation

/// SplitMix64: a small seeded generator, so a randomized test's failure can be replayed.
///
/// Use `SeededGenerator.forTest()` in property and crash tests: it takes its seed from
/// `$SEALEDPUSH_TEST_SEED` when set, else picks one, and prints `seed: N` with the test's name, so a
/// failing run is replayed with `SEALEDPUSH_TEST_SEED=N swift test --filter ...`.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    /// The generator's state.
    public private(set) var state: UInt64
    /// The seed it started from.
    public let seed: UInt64

    /// A generator that starts from `seed` (the same seed gives the same sequence).
    public init(seed: UInt64) {
        self.seed = seed
        state = seed
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The seed in `$SEALEDPUSH_TEST_SEED` (decimal, or hexadecimal with `0x`), if set and valid.
    public static var environmentSeed: UInt64? {
        guard let text = ProcessInfo.processInfo.environment["SEALEDPUSH_TEST_SEED"]?.trimmingCharacters(in: .whitespaces),
              !text.isEmpty else { return nil }
        if text.lowercased().hasPrefix("0x") { return UInt64(text.dropFirst(2), radix: 16) }
        return UInt64(text)
    }

    /// A generator for the calling test: seeded from `$SEALEDPUSH_TEST_SEED`, else from a fresh random seed;
    /// prints `seed: N (test) — replay with SEALEDPUSH_TEST_SEED=N` to standard output either way.
    public static func forTest(_ test: String = #function, file: String = #fileID) -> SeededGenerator {
        let seed = environmentSeed ?? UInt64.random(in: 0...UInt64.max)
        print("seed: \(seed) (\(file) \(test)) — replay with SEALEDPUSH_TEST_SEED=\(seed)")
        return SeededGenerator(seed: seed)
    }
}
