import CSodiumFloor
import SealedPushCrypto

/// The floor the benchmark compares against: bare libsodium sealed-box loops with no SealedPush code
/// in them (no `SecureBytes`, no arrays allocated per iteration).
///
/// Input and output are separate preallocated buffers (libsodium 1.0.18 corrupts a sealed box made
/// in place). Only `sealedpush-bench` uses these; they are not part of the wire format.
enum RawSodiumLoops {
    /// What one loop did: how long the timed loop took and how many calls failed (should be 0).
    public struct Timing: Sendable {
        /// Wall-clock time of the loop alone (setup excluded).
        public let elapsed: Duration
        /// Iterations run.
        public let iterations: Int
        /// Calls that returned an error.
        public let failures: Int
    }

    /// `iterations` calls of `crypto_box_seal` of a `messageBytes`-byte message to one fresh recipient key.
    public static func sealLoop(iterations: Int, messageBytes: Int = 256) -> Timing {
        precondition(iterations >= 0 && messageBytes >= 0, "iterations and message size must not be negative")
        _ = sodium_init()  // idempotent; SealedPushCrypto's own initialisation is internal to it
        let pk = UnsafeMutablePointer<UInt8>.allocate(capacity: Int(crypto_box_PUBLICKEYBYTES))
        let sk = UnsafeMutablePointer<UInt8>.allocate(capacity: Int(crypto_box_SECRETKEYBYTES))
        let message = UnsafeMutablePointer<UInt8>.allocate(capacity: max(messageBytes, 1))
        let box = UnsafeMutablePointer<UInt8>.allocate(capacity: messageBytes + SealedBox.overhead)
        defer {
            sodium_memzero(sk, Int(crypto_box_SECRETKEYBYTES))
            pk.deallocate(); sk.deallocate(); message.deallocate(); box.deallocate()
        }
        _ = crypto_box_keypair(pk, sk)
        randombytes_buf(message, messageBytes)
        var failures = 0
        let clock = ContinuousClock()
        let start = clock.now
        for _ in 0..<iterations {
            if crypto_box_seal(box, message, UInt64(messageBytes), pk) != 0 { failures += 1 }
        }
        let elapsed = clock.now - start
        return Timing(elapsed: elapsed, iterations: iterations, failures: failures)
    }

    /// `iterations` calls of `crypto_box_seal_open` of one sealed `messageBytes`-byte message.
    public static func openLoop(iterations: Int, messageBytes: Int = 256) -> Timing {
        precondition(iterations >= 0 && messageBytes >= 0, "iterations and message size must not be negative")
        _ = sodium_init()  // idempotent; SealedPushCrypto's own initialisation is internal to it
        let pk = UnsafeMutablePointer<UInt8>.allocate(capacity: Int(crypto_box_PUBLICKEYBYTES))
        let sk = UnsafeMutablePointer<UInt8>.allocate(capacity: Int(crypto_box_SECRETKEYBYTES))
        let message = UnsafeMutablePointer<UInt8>.allocate(capacity: max(messageBytes, 1))
        let box = UnsafeMutablePointer<UInt8>.allocate(capacity: messageBytes + SealedBox.overhead)
        let opened = UnsafeMutablePointer<UInt8>.allocate(capacity: max(messageBytes, 1))
        defer {
            sodium_memzero(sk, Int(crypto_box_SECRETKEYBYTES))
            sodium_memzero(opened, max(messageBytes, 1))
            pk.deallocate(); sk.deallocate(); message.deallocate(); box.deallocate(); opened.deallocate()
        }
        _ = crypto_box_keypair(pk, sk)
        randombytes_buf(message, messageBytes)
        _ = crypto_box_seal(box, message, UInt64(messageBytes), pk)
        let boxBytes = UInt64(messageBytes + SealedBox.overhead)
        var failures = 0
        let clock = ContinuousClock()
        let start = clock.now
        for _ in 0..<iterations {
            if crypto_box_seal_open(opened, box, boxBytes, pk, sk) != 0 { failures += 1 }
        }
        let elapsed = clock.now - start
        return Timing(elapsed: elapsed, iterations: iterations, failures: failures)
    }
}
