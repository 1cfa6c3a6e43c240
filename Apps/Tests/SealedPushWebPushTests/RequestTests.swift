import Crypto
import Foundation
import SealedPushWebPush
import Testing

@Suite("Web Push request headers: TTL, Urgency, Topic")
struct RequestTests {
    @Test func topicIsTheFirst32CharactersOfBase64URLSHA256() {
        // SHA-256("") = e3b0c442…, base64 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=
        #expect(WebPushRequest.topic(collapseID: "") == "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NM")
        let topic = WebPushRequest.topic(collapseID: "chat-42")
        #expect(topic == String(toB64u(SHA256.hash(data: Data("chat-42".utf8))).prefix(32)))
        #expect(topic.count == 32 && !topic.contains("="))
        #expect(WebPushRequest.isValidTopic(topic))
        #expect(!topic.contains("chat"))
    }

    @Test func topicsAreChecked() {
        #expect(WebPushRequest.isValidTopic("a"))
        #expect(!WebPushRequest.isValidTopic(""))
        #expect(!WebPushRequest.isValidTopic(String(repeating: "a", count: 33)))
        #expect(!WebPushRequest.isValidTopic("a=b"))
        #expect(!WebPushRequest.isValidTopic("a+b"))
    }

    @Test func urgencyFromPriority() {
        #expect(WebPushUrgency(priority: 10) == .high)
        #expect(WebPushUrgency(priority: 5) == .normal)
        #expect(WebPushUrgency(priority: 1) == nil)
        #expect(WebPushUrgency(headerValue: "Very-Low") == .veryLow)
        #expect(WebPushUrgency(headerValue: "urgent") == nil)
        #expect(WebPushUrgency.allCases.map(\.rawValue) == ["very-low", "low", "normal", "high"])
    }

    @Test func ttlIsWholeSecondsUntilExpiry() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(WebPushRequest.ttl(expiresAt: now.addingTimeInterval(100.9), now: now) == 100)
        #expect(WebPushRequest.ttl(expiresAt: now, now: now) == 0)
        #expect(WebPushRequest.ttl(expiresAt: now.addingTimeInterval(-5), now: now) == 0)
        #expect(WebPushRequest.ttl(expiresAt: 1_700_003_600, now: 1_700_000_000) == 3600)
        #expect(WebPushRequest.ttl(expiresAt: 1, now: 2) == 0)
        #expect(WebPushRequest.ttl(expiresAt: .max, now: .min) == Int(Int32.max))
        #expect(WebPushRequest.parseTTL("0") == 0)
        #expect(WebPushRequest.parseTTL("86400") == 86400)
        #expect(WebPushRequest.parseTTL("-1") == nil)
        #expect(WebPushRequest.parseTTL("1.5") == nil)
        #expect(WebPushRequest.parseTTL("") == nil)
        #expect(WebPushRequest.parseTTL("99999999999") == nil)
    }

    @Test func headersInSpecOrder() {
        let headers = WebPushRequest.headers(ttl: 60, urgency: .high, topic: "abc", authorization: "vapid t=x, k=y")
        #expect(headers.map(\.name) == ["TTL", "Urgency", "Topic", "Content-Encoding", "Authorization"])
        #expect(headers.map(\.value) == ["60", "high", "abc", "aes128gcm", "vapid t=x, k=y"])
        let untopical = WebPushRequest.headers(ttl: -3, urgency: .normal, topic: nil, authorization: "a")
        #expect(untopical.map(\.name) == ["TTL", "Urgency", "Content-Encoding", "Authorization"])
        #expect(untopical[0].value == "0")
    }
}
