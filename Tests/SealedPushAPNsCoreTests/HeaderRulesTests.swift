import SealedPushAPNsCore
import SealedPushSender
import Testing

/// The header rules live once, in APNsCore: the sender, `APNsPush.problem` and the local APNs agree.
@Suite("APNs header rules: one model")
struct HeaderRulesTests {
    static let token = String(repeating: "ab", count: 32)

    func push(collapseID: String? = nil, topic: String = "com.example.app") -> APNsPush {
        APNsPush(deviceToken: Self.token, payload: Array("{}".utf8), topic: topic, expiration: 0, collapseID: collapseID)
    }

    @Test("collapse ids: empty, over 64 bytes and control characters are refused by both the sender and the push", arguments: [
        ("", APNsHeaderRules.Problem.empty),
        (String(repeating: "é", count: 33), .tooLong(bytes: 66, limit: 64)),
        ("line\nbreak", .controlCharacters),
        ("tab\there", .controlCharacters),
        ("\u{7f}", .controlCharacters),
    ])
    func badCollapseIDs(collapseID: String, expected: APNsHeaderRules.Problem) {
        #expect(APNsHeaderRules.collapseIDProblem(collapseID) == expected)
        #expect(push(collapseID: collapseID).problem == "the collapse id \(expected)")
        #expect(throws: SenderError.invalidCollapseID(expected.description)) { try APNsHeaders.validateCollapseID(collapseID) }
    }

    @Test("collapse ids of 1 to 64 bytes of text pass everywhere", arguments: ["a", String(repeating: "x", count: 64), "thread-7 ✉️"])
    func goodCollapseIDs(collapseID: String) throws {
        #expect(APNsHeaderRules.collapseIDProblem(collapseID) == nil)
        #expect(push(collapseID: collapseID).problem == nil)
        try APNsHeaders.validateCollapseID(collapseID)
    }

    @Test("topics: empty, with whitespace, control or non-ASCII characters are refused by both", arguments: [
        ("", APNsHeaderRules.Problem.empty), ("com.example app", .notABundleID), ("com.example\r\nx: y", .notABundleID),
        ("com.exämple", .notABundleID),
    ])
    func badTopics(topic: String, expected: APNsHeaderRules.Problem) {
        #expect(APNsHeaderRules.topicProblem(topic) == expected)
        #expect(push(topic: topic).problem == "the topic (the app's bundle id) \(expected)")
        #expect(throws: SenderError.invalidTopic(expected.description)) { try APNsHeaders.validateTopic(topic) }
    }

    @Test func bundleIDsPass() throws {
        for topic in ["com.example.app", "com.example.app.voip", "com.example.app.complication"] {
            #expect(APNsHeaderRules.topicProblem(topic) == nil)
            #expect(push(topic: topic).problem == nil)
            try APNsHeaders.validateTopic(topic)
        }
    }
}

@Suite("Collapse id control characters")
struct CollapseIDControlTests {
    /// The code-point test for control characters agrees with Unicode's general category Cc over the whole
    /// Basic Multilingual Plane and the start of the next.
    @Test func controlCharactersAreExactlyCategoryCc() {
        for value in UInt32(0)...0x1_0FFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let isControl = scalar.properties.generalCategory == .control
            let problem = APNsHeaderRules.collapseIDProblem("a" + String(Character(scalar)))
            #expect((problem == .controlCharacters) == isControl, "U+\(String(value, radix: 16))")
        }
    }
}
