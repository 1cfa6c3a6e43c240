/// Arithmetic modulo p = 2²⁵⁵ − 19 in five 51-bit limbs, for public values only.
///
/// Used to map an Edwards point's y to the Montgomery u-coordinate of an ephemeral public key.
/// It is not constant-time and must never see a secret.
struct Field25519 {
    var l0, l1, l2, l3, l4: UInt64

    static let mask: UInt64 = (1 << 51) - 1
    static let one = Field25519(l0: 1, l1: 0, l2: 0, l3: 0, l4: 0)

    /// Loads 32 little-endian bytes, ignoring bit 255 (the Edwards sign bit).
    init(bytes b: [UInt8]) {
        func word(_ i: Int) -> UInt64 {
            var w: UInt64 = 0
            for k in 0..<8 { w |= UInt64(b[i * 8 + k]) << (8 * UInt64(k)) }
            return w
        }
        let w0 = word(0), w1 = word(1), w2 = word(2), w3 = word(3) & 0x7fff_ffff_ffff_ffff
        l0 = w0 & Self.mask
        l1 = (w0 >> 51 | w1 << 13) & Self.mask
        l2 = (w1 >> 38 | w2 << 26) & Self.mask
        l3 = (w2 >> 25 | w3 << 39) & Self.mask
        l4 = w3 >> 12
    }

    init(l0: UInt64, l1: UInt64, l2: UInt64, l3: UInt64, l4: UInt64) {
        (self.l0, self.l1, self.l2, self.l3, self.l4) = (l0, l1, l2, l3, l4)
    }

    static func + (a: Field25519, b: Field25519) -> Field25519 {
        Field25519(l0: a.l0 + b.l0, l1: a.l1 + b.l1, l2: a.l2 + b.l2, l3: a.l3 + b.l3, l4: a.l4 + b.l4).carried()
    }

    /// a − b computed as a + 2p − b (limbs of both inputs must be below 2⁵²).
    static func - (a: Field25519, b: Field25519) -> Field25519 {
        Field25519(l0: a.l0 + 0xF_FFFF_FFFF_FFDA - b.l0, l1: a.l1 + 0xF_FFFF_FFFF_FFFE - b.l1,
                   l2: a.l2 + 0xF_FFFF_FFFF_FFFE - b.l2, l3: a.l3 + 0xF_FFFF_FFFF_FFFE - b.l3,
                   l4: a.l4 + 0xF_FFFF_FFFF_FFFE - b.l4).carried()
    }

    func carried() -> Field25519 {
        var r = self
        var c: UInt64
        c = r.l0 >> 51; r.l0 &= Self.mask; r.l1 += c
        c = r.l1 >> 51; r.l1 &= Self.mask; r.l2 += c
        c = r.l2 >> 51; r.l2 &= Self.mask; r.l3 += c
        c = r.l3 >> 51; r.l3 &= Self.mask; r.l4 += c
        c = r.l4 >> 51; r.l4 &= Self.mask; r.l0 += c * 19
        c = r.l0 >> 51; r.l0 &= Self.mask; r.l1 += c
        return r
    }

    static func * (a: Field25519, b: Field25519) -> Field25519 {
        // Limbs are below 2⁵² and the 19-multiples below 2⁵⁷, so no product or sum of five exceeds
        // 2¹¹², and wrapping arithmetic (no overflow checks) is exact.
        @inline(__always) func m(_ x: UInt64, _ y: UInt64) -> UInt128 { UInt128(x) &* UInt128(y) }
        let b1_19 = b.l1 &* 19, b2_19 = b.l2 &* 19, b3_19 = b.l3 &* 19, b4_19 = b.l4 &* 19
        let r0 = m(a.l0, b.l0) &+ m(a.l1, b4_19) &+ m(a.l2, b3_19) &+ m(a.l3, b2_19) &+ m(a.l4, b1_19)
        let r1 = m(a.l0, b.l1) &+ m(a.l1, b.l0) &+ m(a.l2, b4_19) &+ m(a.l3, b3_19) &+ m(a.l4, b2_19)
        let r2 = m(a.l0, b.l2) &+ m(a.l1, b.l1) &+ m(a.l2, b.l0) &+ m(a.l3, b4_19) &+ m(a.l4, b3_19)
        let r3 = m(a.l0, b.l3) &+ m(a.l1, b.l2) &+ m(a.l2, b.l1) &+ m(a.l3, b.l0) &+ m(a.l4, b4_19)
        let r4 = m(a.l0, b.l4) &+ m(a.l1, b.l3) &+ m(a.l2, b.l2) &+ m(a.l3, b.l1) &+ m(a.l4, b.l0)
        return reduce(r0, r1, r2, r3, r4)
    }

    /// Carries five 128-bit column sums back into 51-bit limbs.
    @inline(__always)
    static func reduce(_ c0: UInt128, _ c1: UInt128, _ c2: UInt128, _ c3: UInt128, _ c4: UInt128) -> Field25519 {
        let mask = UInt128(Self.mask)
        var r0 = c0, r1 = c1, r2 = c2, r3 = c3, r4 = c4
        r1 &+= r0 &>> 51; r0 &= mask
        r2 &+= r1 &>> 51; r1 &= mask
        r3 &+= r2 &>> 51; r2 &= mask
        r4 &+= r3 &>> 51; r3 &= mask
        let c = r4 &>> 51; r4 &= mask
        r0 &+= c &* 19
        r1 &+= r0 &>> 51; r0 &= mask
        return Field25519(l0: UInt64(truncatingIfNeeded: r0), l1: UInt64(truncatingIfNeeded: r1), l2: UInt64(truncatingIfNeeded: r2),
                          l3: UInt64(truncatingIfNeeded: r3), l4: UInt64(truncatingIfNeeded: r4))
    }

    /// self², with 15 limb products instead of 25.
    func squared() -> Field25519 { squared(times: 1) }

    /// self^(2ⁿ): `n` squarings on local limbs (no struct round trip through memory per step).
    func squared(times n: Int) -> Field25519 {
        var (a0, a1, a2, a3, a4) = (l0, l1, l2, l3, l4)
        let mask = UInt128(Self.mask)
        @inline(__always) func m(_ x: UInt64, _ y: UInt64) -> UInt128 { UInt128(x) &* UInt128(y) }
        for _ in 0..<n {
            // Limbs are below 2⁵²; no column sum exceeds 2¹¹¹, so wrapping arithmetic is exact.
            let d0 = a0 &* 2, d1 = a1 &* 2, d2_38 = a2 &* 38, d4_19 = a4 &* 19, d4_38 = a4 &* 38
            var r0 = m(a0, a0) &+ m(d4_38, a1) &+ m(d2_38, a3)
            var r1 = m(d0, a1) &+ m(d4_38, a2) &+ m(a3, a3 &* 19)
            var r2 = m(d0, a2) &+ m(a1, a1) &+ m(d4_38, a3)
            var r3 = m(d0, a3) &+ m(d1, a2) &+ m(a4, d4_19)
            var r4 = m(d0, a4) &+ m(d1, a3) &+ m(a2, a2)
            r1 &+= r0 &>> 51; r0 &= mask
            r2 &+= r1 &>> 51; r1 &= mask
            r3 &+= r2 &>> 51; r2 &= mask
            r4 &+= r3 &>> 51; r3 &= mask
            let c = r4 &>> 51; r4 &= mask
            r0 &+= c &* 19
            r1 &+= r0 &>> 51; r0 &= mask
            (a0, a1, a2, a3, a4) = (UInt64(truncatingIfNeeded: r0), UInt64(truncatingIfNeeded: r1), UInt64(truncatingIfNeeded: r2),
                                    UInt64(truncatingIfNeeded: r3), UInt64(truncatingIfNeeded: r4))
        }
        return Field25519(l0: a0, l1: a1, l2: a2, l3: a3, l4: a4)
    }

    /// self^(p−2), the inverse (0 maps to 0), with the ref10 addition chain.
    func inverted() -> Field25519 {
        let z2 = squared()
        let z9 = z2.squared(times: 2) * self
        let z11 = z9 * z2
        let z2_5_0 = z11.squared() * z9
        let z2_10_0 = z2_5_0.squared(times: 5) * z2_5_0
        let z2_20_0 = z2_10_0.squared(times: 10) * z2_10_0
        let z2_40_0 = z2_20_0.squared(times: 20) * z2_20_0
        let z2_50_0 = z2_40_0.squared(times: 10) * z2_10_0
        let z2_100_0 = z2_50_0.squared(times: 50) * z2_50_0
        let z2_200_0 = z2_100_0.squared(times: 100) * z2_100_0
        let z2_250_0 = z2_200_0.squared(times: 50) * z2_50_0
        return z2_250_0.squared(times: 5) * z11
    }

    /// Fully reduced 32 little-endian bytes.
    var bytes: [UInt8] {
        var h = carried().carried()
        var q = (h.l0 + 19) >> 51
        q = (h.l1 + q) >> 51
        q = (h.l2 + q) >> 51
        q = (h.l3 + q) >> 51
        q = (h.l4 + q) >> 51
        h.l0 += 19 * q
        var c: UInt64
        c = h.l0 >> 51; h.l0 &= Self.mask; h.l1 += c
        c = h.l1 >> 51; h.l1 &= Self.mask; h.l2 += c
        c = h.l2 >> 51; h.l2 &= Self.mask; h.l3 += c
        c = h.l3 >> 51; h.l3 &= Self.mask; h.l4 += c
        h.l4 &= Self.mask
        let w0 = h.l0 | h.l1 << 51
        let w1 = h.l1 >> 13 | h.l2 << 38
        let w2 = h.l2 >> 26 | h.l3 << 25
        let w3 = h.l3 >> 39 | h.l4 << 12
        var out = [UInt8](repeating: 0, count: 32)
        for (i, w) in [w0, w1, w2, w3].enumerated() {
            for k in 0..<8 { out[i * 8 + k] = UInt8(truncatingIfNeeded: w >> (8 * UInt64(k))) }
        }
        return out
    }

    /// The Montgomery u = (1 + y) / (1 − y) of an encoded Edwards point; `nil` for y = 1 (the identity).
    static func montgomeryU(fromEdwardsY encoded: [UInt8]) -> [UInt8]? {
        let y = Field25519(bytes: encoded)
        let denominator = Field25519.one - y
        if denominator.bytes.allSatisfy({ $0 == 0 }) { return nil }
        return ((Field25519.one + y) * denominator.inverted()).bytes
    }
}
