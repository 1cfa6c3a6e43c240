import SealedPushAPNsCore
import SealedPushSender
import SealedPushWire
import Testing

/// `send --batch` lines and the recognition of `seal` output, in the sender library (no CLI process).
@Suite("Sender: send lines and seal output wrappers")
struct SendLineTests {
    static let token = String(repeating: "0f", count: 32)

    func line(_ record: DeviceKeyRecord, _ extra: String) -> [UInt8] {
        Array(#"{"to":\#(String(decoding: record.jsonBytes, as: UTF8.self)),"body":"hi"\#(extra)}"#.utf8)
    }

    @Test func aLineBecomesThePushForItsToken() throws {
        let device = makeDevice()
        let sealer = JSONLSealer(sender: try makeSender())
        let push = try sealer.sealPush(line: line(device.record, #","device_token":"\#(Self.token)","collapse_id":"c1""#).span,
                                       topic: "com.example.app")
        #expect(push.deviceToken == Self.token)
        #expect(push.topic == "com.example.app")
        #expect(push.collapseID == "c1")
        // Without a collapse id of its own, the push collapses under its message id (device-outcomes.md, "Replays").
        let plain = try sealer.sealPush(line: line(device.record, #","device_token":"\#(Self.token)","id":"m-17""#).span,
                                        topic: "com.example.app")
        #expect(plain.collapseID == "m-17")
        // A message id is at most 64 bytes of UTF-8 (f391d7c), so it always fits as a collapse id: 40 characters
        // of 2 bytes are refused before any push is made.
        let long = String(repeating: "é", count: 40)
        #expect(throws: SenderError.self) {
            try sealer.sealPush(line: line(device.record, #","device_token":"\#(Self.token)","id":"\#(long)""#).span, topic: "com.example.app")
        }
        #expect(push.problem == nil)
        let payload = try #require(try JSON.parse(push.payload).objectValue)
        #expect(payload["ENCRYPTED_DATA"] != nil)
        // The line's own topic wins over the command's, when the run allows it.
        let own = try sealer.sealPush(line: line(device.record, #","device_token":"\#(Self.token)","topic":"com.example.other""#).span,
                                      topic: "com.example.app", allowedTopics: ["com.example.other"])
        #expect(own.topic == "com.example.other")
    }

    @Test func aLineCannotPushToATopicTheRunDoesNotAllow() throws {
        let device = makeDevice()
        let sealer = JSONLSealer(sender: try makeSender())
        let other = line(device.record, #","device_token":"\#(Self.token)","topic":"com.example.bank""#)
        do {
            _ = try sealer.sealPush(line: other.span, topic: "com.example.app", allowedTopics: ["com.example.chat"])
            Issue.record("a line's topic outside the run's was accepted")
        } catch {
            #expect(error.description.contains(#""com.example.bank" is not this run's topic"#), "\(error.description)")
            #expect(error.description.contains("--allow-topic"))
        }
        // Its own topic repeated is fine.
        let same = line(device.record, #","device_token":"\#(Self.token)","topic":"com.example.app""#)
        #expect(try sealer.sealPush(line: same.span, topic: "com.example.app").topic == "com.example.app")
    }

    @Test("a line without a usable device_token is refused naming it", arguments: [
        (#""#, "has no \"device_token\""), (#","device_token":"abc""#, "must be 64 hexadecimal digits; it has 3 characters"),
        (#","device_token":7"#, "has no \"device_token\""),
    ])
    func badTokens(extra: String, expected: String) throws {
        let sealer = JSONLSealer(sender: try makeSender())
        #expect(throws: SenderError.self) { try sealer.sealPush(line: line(makeDevice().record, extra).span, topic: nil) }
        do { _ = try sealer.sealPush(line: line(makeDevice().record, extra).span, topic: nil) } catch {
            #expect(error.description.contains(expected), "\(error.description)")
        }
    }

    @Test func notJSONIsRefused() throws {
        let sealer = JSONLSealer(sender: try makeSender())
        for bad in ["not json", "[1,2]", ""] {
            #expect(throws: SenderError.self) { try sealer.sealPush(line: Array(bad.utf8).span, topic: nil) }
        }
    }

    @Test func sealOutputIsRecognised() throws {
        let device = makeDevice()
        let sealed = try makeSender().seal(SecretMessage(body: "hi"), to: device.record)
        var headers: [UInt8] = Array(#"{"headers":"#.utf8)
        sealed.headers.writeJSON(into: &headers)
        headers += Array(#","payload":"#.utf8) + sealed.payload + [UInt8(ascii: "}")]
        #expect(SealOutputWrapper.detect(headers) == .headersOutput)
        var batchLine: [UInt8] = []
        JSONLSealer.writeResult(sealed, into: &batchLine)
        #expect(SealOutputWrapper.detect(batchLine) == .batchLine)
        var errorLine: [UInt8] = []
        JSONLSealer.writeError(.invalidRequest("x"), line: 3, into: &errorLine)
        #expect(SealOutputWrapper.detect(errorLine) == .batchError)
        #expect(SealOutputWrapper.detect(sealed.payload) == nil)  // a bare payload is what the device wants
        #expect(SealOutputWrapper.detect(Array(#"{"line":1}"#.utf8)) == nil)
        #expect(SealOutputWrapper.detect(Array("  ".utf8)) == nil)
    }
}
