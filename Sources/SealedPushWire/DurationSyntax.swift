/// The one duration syntax of SealedPush's inputs (CLI options, JSONL batch members, records):
/// a whole number and a unit — `500ms`, `30s`, `15m`, `2h`, `7d` — at most 100 years.
public enum DurationSyntax {
    /// The forms, for help texts and error messages.
    public static let forms = "500ms, 30s, 15m, 2h or 7d"

    /// The longest duration accepted: 100 years of 365 days, in milliseconds.
    public static let maximumMilliseconds: Int64 = 100 * 365 * 86_400_000

    private static let units: [(suffix: String, milliseconds: Int64)] = [
        ("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000),
    ]

    /// The milliseconds `text` stands for, or `nil` when it is not a duration.
    ///
    /// `bareNumberUnit` says what a number without a unit means, in milliseconds (`1000`: seconds,
    /// as a JSONL `expires_in` of `"3600"`); `nil` refuses it (a CLI option, where `30` could mean
    /// seconds or milliseconds).
    public static func milliseconds(_ text: String, bareNumberUnit: Int64? = nil) -> Int64? {
        var number = Substring(text)
        var factor: Int64? = bareNumberUnit
        for unit in units where text.hasSuffix(unit.suffix) {
            number = text.dropLast(unit.suffix.count)
            factor = unit.milliseconds
            break
        }
        guard let factor, !number.isEmpty, number.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int64(number) else { return nil }
        let (ms, overflow) = value.multipliedReportingOverflow(by: factor)
        guard !overflow, ms <= maximumMilliseconds else { return nil }
        return ms
    }

    /// `milliseconds` in the largest unit that divides it exactly: `7d`, `2h`, `30s`, `500ms`.
    public static func format(milliseconds: Int64) -> String {
        for unit in units.reversed() where milliseconds != 0 && milliseconds % unit.milliseconds == 0 {
            return "\(milliseconds / unit.milliseconds)\(unit.suffix)"
        }
        return milliseconds == 0 ? "0s" : "\(milliseconds)ms"
    }
}
