#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import SealedPushCrypto
public import SealedPushWire
import Synchronization

/// A `DeviceKeyProvider` for a warm extension process: it keeps the key pairs it has looked up in
/// memory and, before using one, checks with a single 8-byte read that the store has not changed.
///
/// iOS keeps a notification service extension's process alive between notifications; reading and
/// decrypting three item files per notification (`DeviceKeyring.lookUpKey(id:)`, ≈ 140 µs here)
/// would cost four times the sealed-box open itself. This provider answers from memory while the
/// store's change counter (`generation`, moved by every transaction of any process: rotation,
/// retirement, destruction, lock-state change) still has the value it had when the key was read,
/// and re-checks a retired key's deadline against the store's clock on every use. When the counter
/// moved, is odd (a write in progress or interrupted) or cannot be read, it drops every cached key
/// (their guarded memory is wiped) and reads the files as `DeviceKeyring` does.
///
/// The cache trusts that only the store's own API writes the store: an item file edited by hand
/// under a running process is noticed by that process only after the next transaction. At most
/// `capacity` keys are kept; only keys that were found are cached (an unknown key id from hostile
/// input is read from the files each time, and costs the same as without the cache).
public final class CachedDeviceKeyring: DeviceKeyProvider, Sendable {
    /// The keyring behind the cache.
    public let keyring: DeviceKeyring
    /// The most keys kept in memory at once.
    public let capacity: Int

    private struct Entry {
        let pair: BoxKeyPair
        let usableUntil: Date?
    }

    private struct State: ~Copyable {
        var reader: GenerationReader
        var generation: GenerationStamp?
        var entries: [KeyID: Entry] = [:]
        var hits = 0
        var misses = 0
    }

    private let state: Mutex<State>

    /// A cache over `keyring` keeping up to `capacity` key pairs (default 16).
    public init(keyring: DeviceKeyring, capacity: Int = 16) {
        self.keyring = keyring
        self.capacity = max(1, capacity)
        state = Mutex(State(reader: GenerationReader(root: keyring.store.root)))
    }

    /// Lookups answered from memory and lookups that read the store, since creation.
    public var statistics: (hits: Int, misses: Int) { state.withLock { ($0.hits, $0.misses) } }

    /// The usable key pair with id `keyID`, from memory while the store is unchanged; otherwise as
    /// `DeviceKeyring.lookUpKey(id:)`.
    public func lookUpKey(id keyID: KeyID) -> KeyLookup {
        let now = keyring.store.now()
        enum Step { case answered(KeyLookup), read(seen: GenerationStamp?) }
        let step = state.withLock { s -> Step in
            let generation = s.reader.current()
            guard let generation, !generation.isWriting else {
                s.entries.removeAll()
                s.generation = nil
                return .read(seen: nil)
            }
            if generation != s.generation {
                s.entries.removeAll()
                s.generation = generation
            }
            guard let entry = s.entries[keyID] else { return .read(seen: generation) }
            s.hits += 1
            if let deadline = entry.usableUntil, now > deadline { return .answered(.unknown) }
            return .answered(.found(entry.pair))
        }
        let seen: GenerationStamp?
        switch step {
        case let .answered(answer): return answer
        case let .read(generation): seen = generation
        }
        let result = keyring.core.lookUp(keyID)
        state.withLock { s in
            s.misses += 1
            // Keep the pair only if nothing was written while it was read: the counter is still even
            // and still the value seen before the files were read.
            guard case let .found(pair, usableUntil) = result, let seen,
                  s.reader.current() == seen, s.generation == seen else { return }
            if s.entries.count >= capacity, s.entries[keyID] == nil { s.entries.removeAll() }
            s.entries[keyID] = Entry(pair: pair, usableUntil: usableUntil)
        }
        return result.keyLookup
    }
}
