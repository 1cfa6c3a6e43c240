import SealedPushAPNsCore
import Testing

@Suite("APNs reasons")
struct APNsReasonTests {
    @Test func everyDocumentedReasonRoundTripsAndHasItsStatus() {
        let expected: [String: Int] = [
            "BadCollapseId": 400, "BadDeviceToken": 400, "BadExpirationDate": 400, "BadMessageId": 400, "BadPriority": 400,
            "BadTopic": 400, "DeviceTokenNotForTopic": 400, "DuplicateHeaders": 400, "IdleTimeout": 400,
            "InvalidPushType": 400, "MissingDeviceToken": 400, "MissingTopic": 400, "PayloadEmpty": 400, "TopicDisallowed": 400,
            "BadCertificate": 403, "BadCertificateEnvironment": 403, "ExpiredProviderToken": 403, "Forbidden": 403,
            "InvalidProviderToken": 403, "MissingProviderToken": 403, "UnrelatedKeyIdInToken": 403,
            "BadEnvironmentKeyIdInToken": 403, "BadPath": 404, "MethodNotAllowed": 405, "Unregistered": 410,
            "ExpiredToken": 410, "PayloadTooLarge": 413, "TooManyProviderTokenUpdates": 429, "TooManyRequests": 429,
            "InternalServerError": 500, "ServiceUnavailable": 503, "Shutdown": 503,
        ]
        #expect(APNsReason.documented.count == expected.count)
        for (raw, status) in expected {
            let reason = APNsReason(rawValue: raw)
            #expect(reason.rawValue == raw)
            #expect(reason.status == status, "\(raw)")
            if case .unknown = reason { Issue.record("\(raw) maps to unknown") }
        }
        #expect(APNsReason(rawValue: "SomethingNew") == .unknown("SomethingNew"))
        #expect(Set(APNsReason.documented.filter(\.stopSendingToToken)) == [.unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic])
    }
}
