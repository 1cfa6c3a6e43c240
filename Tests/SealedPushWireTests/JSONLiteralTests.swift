import Testing
import SealedPushWire

@Suite("JSON values from plain Swift values")
struct JSONLiteralTests {
    struct Order: Encodable {
        let order: String
        let items: [Int]
        let paid: Bool
    }

    @Test("literals build the same object as the enum cases, in the literal's order")
    func literals() {
        let data: JSONObject = ["order": "42", "items": [1, 2], "paid": true, "ratio": 0.5, "note": .null, "nested": ["k": "v"]]
        let expected = JSONObject([
            ("order", .string("42")), ("items", .array([.int(1), .int(2)])), ("paid", .bool(true)), ("ratio", .double(0.5)),
            ("note", .null), ("nested", .object(JSONObject([("k", .string("v"))]))),
        ])
        #expect(data == expected)
    }

    @Test("an Encodable struct becomes its object; a value that is not an object is refused")
    func encodable() throws {
        let object = try JSONObject(encoding: Order(order: "42", items: [1, 2], paid: true))
        #expect(object["order"] == "42" && object["items"] == [1, 2] && object["paid"] == true)
        #expect(throws: JSONEncodingError.self) { try JSONObject(encoding: [1, 2, 3]) }
    }
}
