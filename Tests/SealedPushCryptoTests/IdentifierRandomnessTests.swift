import Testing
@testable import SealedPushCrypto

/// `CryptoLibrary.randomIdentifierBytes`: ids from a refilled buffer, each byte handed out once.
@Suite struct IdentifierRandomnessTests {
    @Test func countsAndDistinctIDsAcrossRefills() {
        // 3000 ids of 16 bytes span about a dozen refills of the 4 KiB buffer.
        var seen = Set<[UInt8]>()
        for _ in 0..<3000 {
            let id = CryptoLibrary.randomIdentifierBytes(count: 16)
            #expect(id.count == 16)
            seen.insert(id)
        }
        #expect(seen.count == 3000)
    }

    @Test func oddSizesAndLargerThanTheBuffer() {
        for count in [0, 1, 7, 10, 4095, 4096] { #expect(CryptoLibrary.randomIdentifierBytes(count: count).count == count) }
        let big = CryptoLibrary.randomIdentifierBytes(count: 10_000)
        #expect(big.count == 10_000)
        // Not all one value (the chance of a false failure is 2^-80000).
        #expect(Set(big).count > 1)
    }

    @Test func handedOutBytesAreZeroedInTheBuffer() {
        let pool = IdentifierRandomness()
        let first = pool.take(32)
        #expect(first.count == 32)
        #expect(pool.handedOutAreZero())
    }

    @Test func concurrentTakersGetDistinctIDs() async {
        let ids = await withTaskGroup(of: [[UInt8]].self) { group in
            for _ in 0..<4 { group.addTask { (0..<500).map { _ in CryptoLibrary.randomIdentifierBytes(count: 16) } } }
            var all: [[UInt8]] = []
            for await part in group { all += part }
            return all
        }
        #expect(Set(ids).count == 2000)
    }
}
