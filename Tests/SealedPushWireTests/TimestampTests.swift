import Foundation
import Testing
import SealedPushWire
import SealedPushTestSupport

@Suite("Timestamps: the fixed-format parser and formatter agree with Foundation's ISO 8601")
struct TimestampTests {
    static let iso = Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!)
    static let isoFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!)

    /// Foundation switches to the Julian calendar before 1582-10-15; ISO 8601 (and `Timestamp`) stay
    /// proleptic Gregorian, so the comparison starts in 1583.
    @Test("20 000 random instants from 1583 to 9999 format as Foundation does and parse back")
    func randomInstants() throws {
        var rng = SeededGenerator.forTest()
        for _ in 0..<20_000 {
            let seconds = Int64.random(in: -12_212_553_600...253_402_300_799, using: &rng)
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            let text = Timestamp.format(date)
            #expect(text == date.formatted(Self.iso), "\(seconds)")
            #expect(Timestamp.parse(text) == date, "\(text)")
        }
    }

    @Test("named instants and fractions")
    func named() throws {
        #expect(Timestamp.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
        #expect(Timestamp.format(Date(timeIntervalSince1970: 1_800_000_000.9)) == "2027-01-15T08:00:00Z")
        #expect(Timestamp.format(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59Z")
        #expect(Timestamp.parse("2024-02-29T23:59:59Z") == (try Self.iso.parse("2024-02-29T23:59:59Z")))
        #expect(Timestamp.parse("2026-11-21T12:00:00.250Z") == (try Self.isoFraction.parse("2026-11-21T12:00:00.250Z")))
        #expect(Timestamp.parse("2026-11-21T12:00:00.5Z")?.timeIntervalSince1970 == 1_795_262_400.5)
        #expect(Timestamp.parse("0000-01-01T00:00:00Z")?.timeIntervalSince1970 == -62_167_219_200)
        #expect(Timestamp.parse("9999-12-31T23:59:59Z")?.timeIntervalSince1970 == 253_402_300_799)
    }

    @Test("RFC 3339 offsets and lowercase t/z read as the instant they name, as Foundation reads them")
    func offsets() throws {
        let utc = try #require(Timestamp.parse("2026-11-27T16:27:13Z"))
        #expect(Timestamp.parse("2026-11-27T16:27:13+00:00") == utc)
        #expect(Timestamp.parse("2026-11-27T16:27:13-00:00") == utc)
        #expect(Timestamp.parse("2026-11-27T18:27:13+02:00") == utc)
        #expect(Timestamp.parse("2026-11-27T11:57:13-04:30") == utc)
        #expect(Timestamp.parse("2026-11-27t16:27:13z") == utc)
        #expect(Timestamp.parse("2026-11-28T00:27:13.5+08:00") == utc.addingTimeInterval(0.5))
        let iso = Date.ISO8601FormatStyle()
        for text in ["2026-11-27T18:27:13+02:00", "2026-01-01T00:30:00+01:00", "2024-02-29T23:59:59-12:00"] {
            #expect(Timestamp.parse(text) == (try iso.parse(text)), "\(text)")
        }
    }

    @Test("refusals", arguments: [
        "", "2026-11-21", "2026-11-21T12:00:00", "2026-11-21 12:00:00Z", "2026-11-21T12:00:00+0000", "2026-11-21T12:00:00+24:00",
        "2026-11-21T12:00:00+00:60", "2026-11-21T12:00:00+00", "2026-11-21T12:00:00+00:00Z", "2026-11-21T12:00:00.+00:00",
        "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-11-31T00:00:00Z", "2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z",
        "2026-11-21T24:00:00Z", "2026-11-21T12:60:00Z", "2026-11-21T12:00:60Z", "2026-11-21T12:00:00.Z",
        "2026-11-21T12:00:00.1234567890Z", "+2026-11-21T12:00:00Z", "99999-11-21T12:00:00Z",
        "-001-11-21T12:00:00Z", "2026-1a-21T12:00:00Z", "２０２６-11-21T12:00:00Z", "2026-11-21T12:00:00ZZ", "2026-11-21T12:00:0.Z",
        "2026-11-21T12:00:00.1e3Z", "2026-11-21T12:00:00\u{0}Z",
    ])
    func refusals(text: String) {
        #expect(Timestamp.parse(text) == nil)
    }
}
