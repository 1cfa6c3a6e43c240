import Foundation
@testable import SealedPushGateway
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWire
import Testing

/// #44 pilot 3: the receivers docs/platforms.md gives for Android (Kotlin) and a browser's service worker (JavaScript)
/// confirm with the receipt POST of receipts v1 §2 and do every wire v1 check. Neither Kotlin nor a service worker
/// runs here, so each is translated to Python, check for check (the numbered steps of the docs are the translation's),
/// and run on a message the gateway sent through the local push service, as that service captured it
/// (`fcm serve --capture`, `webpush serve --capture`): it opens, its receipt makes the delivery `delivered`, and
/// messages built to fail each check fail with their wire v1 reason.
@Suite("docs/platforms.md receivers (Python translations) on captured messages", .serialized, .timeLimit(.minutes(5)))
struct DocsReceiverTests {
    /// The device key the translations hold: made in Python (PyNaCl), its record registered with the gateway.
    static let keygen = #"""
import base64, json, sys
from nacl.public import PrivateKey
from nacl.hash import blake2b
from nacl.encoding import RawEncoder
while True:  # a key id with a letter in its hex, so that its uppercase form differs
    sk = PrivateKey.generate()
    pk = bytes(sk.public_key)
    kid = blake2b(pk, digest_size=16, encoder=RawEncoder)[:8]
    if any(c in "abcdef" for c in kid.hex()):
        break
print(json.dumps({"pk": base64.b64encode(pk).decode(), "sk": base64.b64encode(bytes(sk)).decode(),
                  "record": {"type": "sealedpush-device-key", "version": 1, "key_id": kid.hex(),
                             "public_key": base64.b64encode(pk).decode()}}))
"""#

    /// Both receivers, translated. Input on stdin: `{"receiver": "kotlin"|"sw", "message": …, "pk", "sk"}` where
    /// `message` is FCM's `ENCRYPTED_DATA` (Kotlin) or the push event's data as text (service worker). Prints what
    /// the captured message came to and what each crafted message failed with.
    static let receivers = #"""
import base64, json, re, sys, time, urllib.request, urllib.parse, urllib.error
from nacl.public import PrivateKey, PublicKey, SealedBox
from nacl.signing import VerifyKey
from nacl.hash import blake2b
from nacl.encoding import RawEncoder

class Fail(Exception):
    pass

M = "malformedMessage"

def require(condition, reason):
    if not condition:
        raise Fail(reason)

def key_id(pk):  # the first 8 bytes of BLAKE2b-128 of the public key (wire v1 §2)
    return blake2b(pk, digest_size=16, encoder=RawEncoder)[:8]

def hex_(b):  # Kotlin's hex(): lowercase
    return "".join("%02x" % x for x in b)

def is_hex16(v):
    return isinstance(v, str) and re.fullmatch(r"[0-9a-f]{16}", v) is not None

def is_integer(v):  # Kotlin: Int or Long
    return isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63

def is_safe_integer(v):  # JavaScript: Number.isSafeInteger
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) <= 2**53 - 1

def receipt_of(r):  # receipts v1 §1, as both receivers check it
    require(isinstance(r, dict) and isinstance(r.get("url"), str) and isinstance(r.get("token"), str), M)
    url, token = r["url"], r["token"]
    u = urllib.parse.urlsplit(url)
    require(len(url.encode()) <= 2048 and u.scheme != "" and u.hostname is not None, M)
    host = u.hostname
    loopback = host == "localhost" or host == "::1" or re.fullmatch(r"127(\.\d{1,3}){3}", host) is not None
    require(u.scheme == "https" or (u.scheme == "http" and loopback), M)
    n = len(token)
    require(re.fullmatch(r"[A-Za-z0-9_-]+", token) is not None and n % 4 != 1 and 16 <= n * 3 // 4 <= 64, M)
    return {"url": url, "token": token}

def open_common(envelope, keys, safe):
    pk, sk, trusted, require_signatures, seen = keys
    require(len(envelope) >= 1 + 8 + 48 + 1 and envelope[0] == 1, "malformedPayload")   # 1. shape, version
    kid = envelope[1:9]
    require(kid == key_id(pk), "unknownKey")                                            # 2. our key
    try:                                                                                # 3. open
        padded = SealedBox(PrivateKey(sk)).decrypt(envelope[9:])
    except Exception:
        raise Fail("decryptionFailed")
    end = len(padded)                                                                   # 4. unpad (ISO 7816-4)
    while end > 0 and padded[end - 1] == 0:
        end -= 1
    require(end > 0 and padded[end - 1] == 0x80, "badPadding")
    inner = padded[:end - 1]
    require(len(inner) >= 3, M)                                                         # 5. framing, JSON, members
    flags = inner[0]
    require(flags & 0xFE == 0, M)
    length = (inner[1] << 8) | inner[2]
    signed = flags & 1 == 1
    require(len(inner) == 3 + length + (64 if signed else 0), M)
    body_bytes = inner[3:3 + length]
    try:
        body = json.loads(body_bytes.decode("utf-8"))
    except Exception:
        raise Fail(M)
    integer = is_safe_integer if safe else is_integer
    require(isinstance(body, dict), M)
    require(isinstance(body.get("id"), str) and 1 <= len(body["id"]) <= 64, M)
    require(is_hex16(body.get("kid")), M)
    require(integer(body.get("iat")), M)
    require("exp" not in body or integer(body["exp"]), M)
    alert = body.get("alert")
    require(isinstance(alert, dict), M)
    parts = [alert.get(k, "") for k in ("title", "subtitle", "body")]
    require(all(isinstance(p, str) for p in parts) and any(parts), M)
    for name in ("thread-id", "category", "sound"):
        require(name not in body or isinstance(body[name], str), M)
    require("badge" not in body or integer(body["badge"]), M)
    require("data" not in body or (isinstance(body["data"], dict) and "aps" not in body["data"]), M)
    require(not signed or is_hex16(body.get("sender")), M)
    receipt = receipt_of(body["receipt"]) if "receipt" in body else None               # receipts v1 §1
    require(body["kid"] == hex_(kid), "recipientMismatch")                             # 6. recipient
    if signed:                                                                          # 7. sender
        sender_key = trusted.get(body["sender"])
        require(sender_key is not None, "untrustedSender")
        message = b"SealedPush-v1-sig" + b"\x00" + kid + body_bytes
        try:
            VerifyKey(sender_key).verify(message, inner[3 + length:])
        except Exception:
            raise Fail("badSignature")
    else:
        require(not require_signatures, "signatureRequired")
    now = int(time.time())                                                              # 8. time (300 s skew)
    require("exp" not in body or now <= body["exp"] + 300, "expired")
    require(body["iat"] <= now + 300, "notYetValid")
    require(body["id"] not in seen, "replayed")                                         # 9. replay
    seen.add(body["id"])
    return {"id": body["id"], "receipt": receipt, "alert": {"title": parts[0], "body": parts[2]}}

def open_kotlin(encrypted, keys):  # onMessageReceived: message.data["ENCRYPTED_DATA"], standard base64
    return open_common(base64.b64decode(encrypted, validate=True), keys, safe=False)

def open_sw(data, keys):  # the push event: event.data.json().ENCRYPTED_DATA, standard base64
    return open_common(base64.b64decode(json.loads(data)["ENCRYPTED_DATA"], validate=True), keys, safe=True)

class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None

def send_receipt(receipt, id_, timeout=2):  # receipts v1 §2: POST within 2 s, no redirects
    body = json.dumps({"v": 1, "type": "delivered", "id": id_, "token": receipt["token"], "at": int(time.time())}).encode()
    request = urllib.request.Request(receipt["url"], data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        return urllib.request.build_opener(NoRedirects).open(request, timeout=timeout).status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception:
        return None  # the outbox keeps it

def seal(pk, body, flags=0, signature=b"", kid=None, version=1, pad=True, raw_inner=None):
    inner = raw_inner if raw_inner is not None else bytes([flags, len(body) >> 8, len(body) & 0xFF]) + body + signature
    padded = inner + (b"\x80" + b"\x00" * 7 if pad else b"")
    return bytes([version]) + (kid or key_id(pk)) + SealedBox(PublicKey(pk)).encrypt(padded)

def main():
    given = json.load(sys.stdin)
    pk, sk = base64.b64decode(given["pk"]), base64.b64decode(given["sk"])
    seen = set()
    keys = (pk, sk, {}, False, seen)
    kotlin = given["receiver"] == "kotlin"
    def run(message, keys=keys):
        try:
            return open_kotlin(message, keys) if kotlin else open_sw(message, keys)
        except Fail as f:
            return str(f)
        except Exception as e:
            return M if isinstance(e, (KeyError, ValueError, TypeError)) else "crash: %r" % e
    opened = run(given["message"])
    out = {"opened": opened if isinstance(opened, dict) else None, "failed": None if isinstance(opened, dict) else opened}
    if isinstance(opened, dict) and opened["receipt"]:
        # The test's gateway may be slow on a loaded machine: where a receiver would queue and retry, it waits longer.
        out["receipt_status"] = send_receipt(opened["receipt"], opened["id"], timeout=given.get("receipt_timeout", 2))
    out["replayed"] = run(given["message"])
    now = int(time.time())
    kid = hex_(key_id(pk))
    good = {"kid": kid, "id": "m-crafted", "iat": now, "alert": {"body": "x"}}
    def variant(name, body=None, wrap=None, **kw):
        b = dict(good, id="m-" + name)
        if body:
            b = body(b)
        envelope = seal(pk, json.dumps(b).encode() if not isinstance(b, bytes) else b, **kw)
        message = base64.b64encode(envelope).decode()
        if not kotlin:
            message = json.dumps({"ENCRYPTED_DATA": message, "sealedpush": 1})
        return run(message, wrap or (pk, sk, {}, False, set()))
    def without(key):
        return lambda b: {k: v for k, v in b.items() if k != key}
    def with_(key, value):
        return lambda b: dict(b, **{key: value})
    fine = variant("fine")
    out["variants"] = {
        "fine": fine if isinstance(fine, str) else "opened",
        "version 2": variant("v2", version=2),
        "another key id": variant("kid", kid=b"\x00" * 8),
        "no 0x80": variant("pad", pad=False),
        "flags bit 1": variant("flags", flags=2),
        "invalid UTF-8": variant("utf8", body=lambda b: b"{\"id\": \"\xff\"}"),
        "not an object": variant("array", body=lambda b: b"[1, 2]"),
        "no iat": variant("iat", body=without("iat")),
        "iat a string": variant("iats", body=with_("iat", str(now))),
        "exp a float": variant("expf", body=with_("exp", now + 0.5)),
        "no id": variant("id", body=without("id")),
        "id of 65 characters": variant("idlong", body=with_("id", "i" * 65)),
        "kid in uppercase": variant("kidupper", body=with_("kid", kid.upper())),
        "another kid": variant("kidother", body=with_("kid", "0" * 16 if kid != "0" * 16 else "1" * 16)),
        "empty alert": variant("alert", body=with_("alert", {"title": ""})),
        "alert body a number": variant("alertnum", body=with_("alert", {"body": 7})),
        "badge a string": variant("badge", body=with_("badge", "3")),
        "data with aps": variant("aps", body=with_("data", {"aps": {}})),
        "receipt token of 8 bytes": variant("token", body=with_("receipt", {"url": "https://r.example/r", "token": "AAAAAAAAAAA"})),
        "receipt over http to a public host": variant("http", body=with_("receipt", {"url": "http://r.example/r", "token": "A" * 22})),
        "signed, sender unknown": variant("signed", body=with_("sender", "ab" * 8), flags=1, signature=b"\x00" * 64),
        "unsigned, signatures required": variant("policy", wrap=(pk, sk, {}, True, set())),
        "expired": variant("exp", body=with_("exp", now - 1000)),
        "issued in the future": variant("future", body=with_("iat", now + 1000)),
    }
    print(json.dumps(out))

main()
"""#

    /// The failures every translation must give (wire v1 §2–§5, receipts v1 §1).
    static let expectedFailures: [String: String] = [
        "fine": "opened",
        "version 2": "malformedPayload", "another key id": "unknownKey", "no 0x80": "badPadding",
        "flags bit 1": "malformedMessage", "invalid UTF-8": "malformedMessage", "not an object": "malformedMessage",
        "no iat": "malformedMessage", "iat a string": "malformedMessage", "exp a float": "malformedMessage",
        "no id": "malformedMessage", "id of 65 characters": "malformedMessage", "kid in uppercase": "malformedMessage",
        "another kid": "recipientMismatch", "empty alert": "malformedMessage", "alert body a number": "malformedMessage",
        "badge a string": "malformedMessage", "data with aps": "malformedMessage", "receipt token of 8 bytes": "malformedMessage",
        "receipt over http to a public host": "malformedMessage", "signed, sender unknown": "untrustedSender",
        "unsigned, signatures required": "signatureRequired", "expired": "expired", "issued in the future": "notYetValid",
    ]

    static func python(_ script: String, _ input: JSONValue) throws -> JSONObject {
        let python = ProjectPaths.python
        try #require(FileManager.default.isExecutableFile(atPath: python.path), "no Python at \(python.path): run `make pydeps`, or set SEALEDPUSH_PYTHON")
        let result = try ChildProcess.run(python, ["-c", script], stdin: JSON.serialize(input), timeout: 60)
        try #require(result.status == 0, "the Python translation failed: \(result.stderr)")
        return try #require(try JSON.parse(Array(result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines).utf8)).objectValue,
                            "no JSON object: \(result.stdoutText)")
    }

    /// The numbered steps of the receiver in the ```kotlin or ```js block after `heading` in docs/platforms.md, and
    /// whether it sends the receipt.
    static func documentedReceiver(after heading: String, fence: String) throws -> String {
        let text = try String(contentsOf: ProjectPaths.root.appendingPathComponent("docs/platforms.md"), encoding: .utf8)
        let section = try #require(text.range(of: heading), "docs/platforms.md lost \(heading)")
        let open = try #require(text[section.upperBound...].range(of: "```\(fence)\n"))
        let close = try #require(text[open.upperBound...].range(of: "\n```"))
        return String(text[open.upperBound..<close.lowerBound])
    }

    /// The translation's steps are the documented receiver's; the documented one sends the receipt, defines `hex`.
    static func checkDocumented(_ code: String, comment: String) {
        for step in ["1. shape, version", "2. our key", "3. open", "4. unpad (ISO 7816-4)", "5. framing, JSON, members", "6. recipient",
                     "7. sender", "8. time (300 s skew)", "9. replay"] {
            #expect(code.contains("\(comment) \(step)"), "the documented receiver lost step \(step)")
            #expect(receivers.contains("# \(step)"), "the translation lost step \(step)")
        }
        for needed in ["sendReceipt(", "\"delivered\"", "receipts v1 §1", "iat", "exp", "badge", "aps", "sender"] {
            #expect(code.contains(needed), "the documented receiver lost \(needed)")
        }
    }

    /// Runs `receiver` on `message` and checks what it came to, the receipt's answer and every crafted failure.
    static func check(_ receiver: String, message: String, key: JSONObject, body: String) throws {
        let out = try python(receivers, .object(JSONObject([("receiver", .string(receiver)), ("message", .string(message)),
                                                           ("pk", key["pk"] ?? .null), ("sk", key["sk"] ?? .null),
                                                           ("receipt_timeout", .int(30))])))
        let opened = try #require(out["opened"]?.objectValue, "\(receiver): the captured message did not open: \(out)")
        #expect(opened["alert"]?.objectValue?["body"]?.stringValue == body)
        #expect(opened["receipt"]?.objectValue?["url"]?.stringValue?.hasSuffix("/v1/receipts") == true, "\(opened)")
        #expect(out["receipt_status"] == .int(204), "\(receiver): the gateway answered the receipt \(String(describing: out["receipt_status"]))")
        #expect(out["replayed"]?.stringValue == "replayed")
        let variants = try #require(out["variants"]?.objectValue)
        for (name, expected) in expectedFailures {
            #expect(variants[name]?.stringValue == expected, "\(receiver), \(name): \(String(describing: variants[name]))")
        }
    }

    @Test func theServiceWorkerReceiverOpensACapturedWebPushMessageAndConfirms() async throws {
        Self.checkDocumented(try Self.documentedReceiver(after: "### Opening the message in a service worker", fence: "js"), comment: "//")
        let dir = try makeScratchDirectory("docs-receiver-webpush")
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = try Self.python(Self.keygen, .object(JSONObject([])))
        let capturePath = dir.appendingPathComponent("captured.jsonl").path
        // The translated service worker is the browser: the service takes any subscription id and only captures.
        let webpush = try await LocalWebPushServe.start(in: dir, arguments: ["--accept-unknown", "--capture", capturePath])
        defer { webpush.stop() }
        let origin = webpush.origin
        let browserKeys = WebPushUserAgentKeys.generate()
        try await withGateway("docs-receiver-webpush", extraApp: webpush.section) { g in
            guard case var .object(subscription) = browserKeys.subscriptionJSON(endpoint: origin + "/push/py-browser") else { return }
            subscription["expirationTime"] = .null
            let registered = try await g.api.call(.PUT, "/v1/apps/chat/devices/py-browser", json: .object(JSONObject([
                ("user_id", "u-py"), ("platform", "webpush"), ("webpush", .object(subscription)), ("key_record", key["record"] ?? .null),
            ])))
            #expect(registered.status == 201, "\(registered.text)")
            let sent = try await g.send(JSONObject([("user_id", "u-py")]), body: "the documented browser")
            let id = try #require(sent.json["message_id"]?.stringValue, "\(sent.text)")
            try await g.waitForStates(id, ["accepted"])
            let captured = try String(contentsOfFile: capturePath, encoding: .utf8).split(separator: "\n")
            let last = try #require(captured.last, "nothing captured")
            let line = try #require(try JSON.parse(Array(last.utf8)).objectValue)
            let body = try #require(line["body_base64url"]?.stringValue.flatMap { WebPushBase64URL.decode($0) })
            // What the browser hands the service worker: the RFC 8291 layer removed.
            let data = String(decoding: try WebPushDecryptor(keys: browserKeys).decrypt(body), as: UTF8.self)
            try Self.check("sw", message: data, key: key, body: "the documented browser")
            try await g.waitForStates(id, ["delivered"])
        }
    }

    @Test func theKotlinReceiverOpensACapturedFCMMessageAndConfirms() async throws {
        Self.checkDocumented(try Self.documentedReceiver(after: "### Opening the message on Android", fence: "kotlin"), comment: "//")
        let dir = try makeScratchDirectory("docs-receiver-fcm")
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = try Self.python(Self.keygen, .object(JSONObject([])))
        // The translated Kotlin receiver is the Android phone: the service takes any token and only captures.
        let token = "docs-receiver:APA91bH-" + String(repeating: "k", count: 40)
        let capturePath = dir.appendingPathComponent("captured.jsonl").path
        let fcm = try await LocalFCMServe.start(in: dir, project: "docs-receiver", arguments: ["--accept-unknown", "--capture", capturePath])
        defer { fcm.stop() }
        try await withGateway("docs-receiver-fcm", extraApp: fcm.section) { g in
            let registered = try await g.api.call(.PUT, "/v1/apps/chat/devices/py-android", json: .object(JSONObject([
                ("user_id", "u-py"), ("platform", "fcm"), ("fcm_token", .string(token)), ("key_record", key["record"] ?? .null),
            ])))
            #expect(registered.status == 201, "\(registered.text)")
            let sent = try await g.send(JSONObject([("user_id", "u-py")]), body: "the documented phone")
            let id = try #require(sent.json["message_id"]?.stringValue, "\(sent.text)")
            try await g.waitForStates(id, ["accepted"])
            let captured = try String(contentsOfFile: capturePath, encoding: .utf8).split(separator: "\n")
            let last = try #require(captured.last, "nothing captured")
            let line = try #require(try JSON.parse(Array(last.utf8)).objectValue)
            let request = try #require(line["body"]?.stringValue.flatMap { try? JSON.parse(Array($0.utf8)).objectValue })
            let encrypted = try #require(request["message"]?.objectValue?["data"]?.objectValue?["ENCRYPTED_DATA"]?.stringValue)
            try Self.check("kotlin", message: encrypted, key: key, body: "the documented phone")
            try await g.waitForStates(id, ["delivered"])
        }
    }
}
