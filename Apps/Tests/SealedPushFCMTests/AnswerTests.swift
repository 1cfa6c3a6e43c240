import Foundation
import SealedPushFCM
import Testing

@Suite("FCM answers")
struct AnswerTests {
    let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT

    func error(_ code: Int, _ status: String, errorCode: String? = nil, message: String = "m", extraDetail: String? = nil) -> [UInt8] {
        var details: [String] = []
        if let errorCode { details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(errorCode)"}"#) }
        if let extraDetail { details.append(extraDetail) }
        return Array(#"{"error":{"code":\#(code),"message":"\#(message)","status":"\#(status)","details":[\#(details.joined(separator: ","))]}}"#.utf8)
    }

    func classify(_ status: Int, _ body: [UInt8], headers: [String: String] = [:], truncated: Bool = false) -> FCMOutcome {
        FCMAnswer.classify(FCMHTTPResponse(status: status, headers: headers, body: body, bodyTruncated: truncated), now: now)
    }

    @Test("200 {name} → accepted with platform_id")
    func accepted() {
        #expect(classify(200, Array(#"{"name":"projects/demo/messages/0:1500415314455276%31bd1c9631bd1c96"}"#.utf8))
            == .accepted(name: "projects/demo/messages/0:1500415314455276%31bd1c9631bd1c96"))
        #expect(classify(200, Array("not json".utf8)) == .accepted(name: nil))
        #expect(classify(200, Array(#"{"name":"x"}"#.utf8), truncated: true) == .accepted(name: nil))
    }

    @Test("404 UNREGISTERED, 403 SENDER_ID_MISMATCH, 400 INVALID_ARGUMENT naming the token → unregistered")
    func unregistered() {
        #expect(classify(404, error(404, "NOT_FOUND", errorCode: "UNREGISTERED", message: "Requested entity was not found."))
            == .unregistered(reason: "UNREGISTERED"))
        #expect(classify(403, error(403, "PERMISSION_DENIED", errorCode: "SENDER_ID_MISMATCH", message: "SenderId mismatch"))
            == .unregistered(reason: "SENDER_ID_MISMATCH"))
        // Google's example of an invalid registration token.
        #expect(classify(400, error(400, "INVALID_ARGUMENT", errorCode: "INVALID_ARGUMENT", message: "The registration token is not a valid FCM registration token"))
            == .unregistered(reason: "INVALID_ARGUMENT"))
        // A field violation on message.token.
        let violation = #"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token","description":"Invalid registration token"}]}"#
        #expect(classify(400, error(400, "INVALID_ARGUMENT", message: "Request contains an invalid argument.", extraDetail: violation))
            == .unregistered(reason: "INVALID_ARGUMENT"))
    }

    @Test("Other 400s, 404s and 4xx → rejected; the reason is errorCode, else status, else HTTP n")
    func rejected() {
        // Google's example of an invalid data value: a field violation elsewhere.
        let violation = #"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.data[0].value","description":"Invalid value at 'message.data[0].value' (TYPE_STRING), 12"}]}"#
        #expect(classify(400, error(400, "INVALID_ARGUMENT", message: "Invalid value at 'message.data[0].value' (TYPE_STRING), 12", extraDetail: violation))
            == .rejected(reason: "INVALID_ARGUMENT"))
        // A field violation on another field wins over a message that mentions the token.
        let other = #"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.android.ttl"}]}"#
        #expect(classify(400, error(400, "INVALID_ARGUMENT", message: "registration token and ttl", extraDetail: other)) == .rejected(reason: "INVALID_ARGUMENT"))
        #expect(classify(400, error(400, "INVALID_ARGUMENT", errorCode: "INVALID_ARGUMENT", message: "Message is too big")) == .rejected(reason: "INVALID_ARGUMENT"))
        #expect(classify(400, error(400, "FAILED_PRECONDITION")) == .rejected(reason: "FAILED_PRECONDITION"))
        #expect(classify(404, error(404, "NOT_FOUND", message: "project not found")) == .rejected(reason: "NOT_FOUND"))
        #expect(classify(413, []) == .rejected(reason: "HTTP 413"))
        #expect(classify(302, []) == .rejected(reason: "HTTP 302"))
        #expect(classify(400, Array("<html>Bad Request</html>".utf8)) == .rejected(reason: "HTTP 400"))
        #expect(classify(400, error(400, "invalid status!", message: "registration token")) == .rejected(reason: "HTTP 400"))
    }

    @Test("429, 500, 503 → retry honouring Retry-After")
    func retry() {
        #expect(classify(429, error(429, "RESOURCE_EXHAUSTED", errorCode: "QUOTA_EXCEEDED"), headers: ["retry-after": "30"])
            == .retry(reason: "QUOTA_EXCEEDED", retryAfter: .seconds(30)))
        #expect(classify(500, error(500, "INTERNAL", errorCode: "INTERNAL")) == .retry(reason: "INTERNAL", retryAfter: nil))
        #expect(classify(503, error(503, "UNAVAILABLE", errorCode: "UNAVAILABLE"), headers: ["retry-after": "Sun, 06 Nov 1994 08:50:37 GMT"])
            == .retry(reason: "UNAVAILABLE", retryAfter: .seconds(60)))
        #expect(classify(503, Array("Service Unavailable".utf8)) == .retry(reason: "HTTP 503", retryAfter: nil))
        #expect(classify(502, []) == .retry(reason: "HTTP 502", retryAfter: nil))
    }

    @Test("401 → renew the token and retry; 403 PERMISSION_DENIED → pause")
    func credentials() {
        #expect(classify(401, error(401, "UNAUTHENTICATED", message: "Request had invalid authentication credentials."))
            == .renewTokenAndRetry(reason: "UNAUTHENTICATED"))
        #expect(classify(401, []) == .renewTokenAndRetry(reason: "HTTP 401"))
        #expect(classify(403, error(403, "PERMISSION_DENIED", message: "Permission 'cloudmessaging.messages.create' denied"))
            == .pauseCredentials(reason: "PERMISSION_DENIED"))
        #expect(classify(403, []) == .pauseCredentials(reason: "HTTP 403"))
    }

    @Test("Malformed, truncated and hostile bodies are classified by status alone")
    func malformed() {
        #expect(classify(404, Array(#"{"error":"UNREGISTERED"}"#.utf8)) == .rejected(reason: "HTTP 404"))
        #expect(classify(404, error(404, "NOT_FOUND", errorCode: "UNREGISTERED"), truncated: true) == .rejected(reason: "HTTP 404"))
        #expect(classify(429, Array(String(repeating: "[", count: 10_000).utf8)) == .retry(reason: "HTTP 429", retryAfter: nil))
        #expect(classify(500, [0xFF, 0xFE, 0x00]) == .retry(reason: "HTTP 500", retryAfter: nil))
        #expect(classify(404, Array(#"{"error":{"details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":42}]}}"#.utf8))
            == .rejected(reason: "HTTP 404"))
    }

    @Test("Retry-After: seconds, IMF-fixdate, RFC 850, asctime; past dates are zero; garbage is ignored")
    func retryAfterForms() {
        #expect(FCMAnswer.retryAfter("120", now: now) == .seconds(120))
        #expect(FCMAnswer.retryAfter(" 0 ", now: now) == .zero)
        #expect(FCMAnswer.retryAfter("Sun, 06 Nov 1994 08:49:47 GMT", now: now) == .seconds(10))
        #expect(FCMAnswer.retryAfter("Sunday, 06-Nov-94 08:51:37 GMT", now: now) == .seconds(120))
        #expect(FCMAnswer.retryAfter("Sun Nov  6 08:49:57 1994", now: now) == .seconds(20))
        #expect(FCMAnswer.retryAfter("Sat, 05 Nov 1994 08:49:37 GMT", now: now) == .zero)
        #expect(FCMAnswer.retryAfter("Thu, 01 Jan 1970 00:00:00 GMT", now: Date(timeIntervalSince1970: 0)) == .zero)
        #expect(FCMAnswer.httpDate("Thu, 01 Jan 2026 00:00:01 GMT") == Date(timeIntervalSince1970: 1_767_225_601))
        #expect(FCMAnswer.httpDate("Tue, 29 Feb 2028 12:00:00 GMT") == Date(timeIntervalSince1970: 1_835_438_400))
        for garbage in ["-1", "1.5", "soon", "", "99999999999999999999", "Sun, 06 Nov 1994 25:00:00 GMT", "Sun, 06 Foo 1994 08:49:37 GMT"] {
            #expect(FCMAnswer.retryAfter(garbage, now: now) == nil, "\(garbage)")
        }
        #expect(FCMAnswer.retryAfter(nil, now: now) == nil)
    }
}
