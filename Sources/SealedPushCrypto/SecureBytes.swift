#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#elseif canImport(CSodium)
import CSodium  // Linux: the system libsodium
#endif  // neither: Sodium.swift stops the build with #error, naming the AppleSodium trait

/// Bytes that hold a secret: wiped with `sodium_memzero` when the last copy is released.
///
/// `SecureBytes` has value semantics with copy-on-write storage, like swift-crypto's type of the
/// same name. Long-lived secrets (private keys) can ask for `guarded` storage, which lives in
/// `sodium_malloc` memory: guard pages on both sides, a canary, and zeroing on free.
/// Equality is constant-time.
public struct SecureBytes: Sendable {
    @usableFromInline
    final class Storage: @unchecked Sendable {
        // Safe to send: the buffer is only written through `SecureBytes`'s mutating API, which
        // copies first unless the storage is uniquely referenced (copy-on-write), so a shared
        // storage object is never mutated.
        let base: UnsafeMutableRawPointer
        let count: Int
        let guarded: Bool

        init(count: Int, guarded: Bool) {
            Sodium.ensureInitialized()
            self.count = count
            self.guarded = guarded
            if guarded {
                guard let pointer = sodium_malloc(Swift.max(count, 1)) else {
                    fatalError("sodium_malloc could not allocate \(count) guarded bytes: out of memory")
                }
                base = pointer
            } else {
                base = UnsafeMutableRawPointer.allocate(byteCount: Swift.max(count, 1), alignment: 16)
            }
            base.initializeMemory(as: UInt8.self, repeating: 0, count: Swift.max(count, 1))
        }

        deinit {
            if guarded {
                sodium_free(base)  // zeroes the region before unmapping it
            } else {
                sodium_memzero(base, Swift.max(count, 1))
                base.deallocate()
            }
        }

        @usableFromInline var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
        var mutableBuffer: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(start: base, count: count) }
    }

    @usableFromInline var storage: Storage

    /// Zero-filled secret bytes of the given length.
    public init(zeros count: Int, guarded: Bool = false) {
        precondition(count >= 0, "SecureBytes count must not be negative")
        storage = Storage(count: count, guarded: guarded)
    }

    /// Copies `bytes` into secret storage. The caller remains responsible for the source.
    public init(_ bytes: some Collection<UInt8>, guarded: Bool = false) {
        let storage = Storage(count: bytes.count, guarded: guarded)
        // Callers in other modules get the unspecialized generic, whose iterator copy costs several
        // nanoseconds per byte; arrays and buffers are copied in one `memcpy` instead.
        let copied = bytes.withContiguousStorageIfAvailable { source -> Bool in
            if let base = source.baseAddress, source.count > 0 { storage.base.copyMemory(from: base, byteCount: source.count) }
            return true
        }
        if copied == nil { _ = storage.mutableBuffer.initializeMemory(as: UInt8.self, from: bytes) }
        self.storage = storage
    }

    /// `count` random bytes from libsodium's CSPRNG.
    public static func random(count: Int, guarded: Bool = false) -> SecureBytes {
        var out = SecureBytes(zeros: count, guarded: guarded)
        out.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        return out
    }

    /// The number of bytes.
    public var count: Int { storage.count }

    /// Whether there are no bytes.
    public var isEmpty: Bool { storage.count == 0 }

    /// Reads the bytes in place; the pointer must not escape the closure.
    @inlinable
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(storage.buffer)
    }

    /// Reads the bytes as a bounds-checked `Span`, for parsing without copying the secret out.
    public func withSpan<R, E: Error>(_ body: (Span<UInt8>) throws(E) -> R) throws(E) -> R {
        let typed = storage.buffer.assumingMemoryBound(to: UInt8.self)
        return try body(typed.span)
    }

    /// Writes the bytes in place, copying first if the storage is shared.
    @usableFromInline
    mutating func withUnsafeMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        if !isKnownUniquelyReferenced(&storage) {
            let copy = Storage(count: storage.count, guarded: storage.guarded)
            copy.base.copyMemory(from: storage.base, byteCount: storage.count)
            storage = copy
        }
        return try body(storage.mutableBuffer)
    }

    /// The concatenation of `parts` in one new secret buffer.
    public init(joining parts: [SecureBytes]) {
        let total = parts.reduce(0) { $0 + $1.count }
        storage = Storage(count: total, guarded: false)
        var offset = 0
        for part in parts {
            if part.count > 0 { (storage.base + offset).copyMemory(from: part.storage.base, byteCount: part.count) }
            offset += part.count
        }
    }

    /// A copy of bytes `range` as new secret bytes (used to split a decrypted message).
    public func slice(_ range: Range<Int>) -> SecureBytes {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "SecureBytes slice out of bounds")
        var out = SecureBytes(zeros: range.count)
        out.withUnsafeMutableBytes { dst in
            if range.count > 0 { dst.baseAddress!.copyMemory(from: storage.base + range.lowerBound, byteCount: range.count) }
        }
        return out
    }

    /// Copies the secret out into an ordinary array. Use only where the value must leave secret
    /// storage (writing an encrypted item, printing a record); the copy is not wiped.
    public func unsafeCopyToArray() -> [UInt8] {
        withUnsafeBytes { Array($0) }
    }

    /// Overwrites the bytes with zeros now, rather than at release.
    public mutating func wipe() {
        withUnsafeMutableBytes { sodium_memzero($0.baseAddress!, Swift.max($0.count, 0)) }
    }
}

extension SecureBytes: Equatable {
    /// Constant-time comparison (`sodium_memcmp`); lengths are compared first, and are not secret.
    public static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.count == 0 { return true }
        return lhs.withUnsafeBytes { a in rhs.withUnsafeBytes { b in sodium_memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 } }
    }
}

extension SecureBytes: CustomStringConvertible, CustomDebugStringConvertible {
    /// Never shows the bytes, only their count.
    public var description: String { "SecureBytes(\(count) bytes, redacted)" }
    /// Never shows the bytes, only their count.
    public var debugDescription: String { description }
}

/// Constant-time comparison of two byte sequences (`sodium_memcmp`). Different lengths compare unequal.
public func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    Sodium.ensureInitialized()
    guard lhs.count == rhs.count else { return false }
    if lhs.isEmpty { return true }
    return lhs.withUnsafeBytes { a in rhs.withUnsafeBytes { b in sodium_memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 } }
}
