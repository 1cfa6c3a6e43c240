#!/usr/bin/env python3
"""An independent SealedPush wire format v1 peer, written from shared/spec/wire-format-v1.md only.

Built on PyNaCl (libsodium's sealed box, Ed25519, BLAKE2b). Used by the Swift interoperability
tests: each command reads one JSON request on stdin and writes one JSON result on stdout.

  peer.py keygen
      -> {"secret_key": b64, "public_key": b64, "key_id": hex, "record": {device key record}}
  peer.py seal  {"record": {...}, "message": {...}, "now": int, "id": str?, "signing_seed": b64?,
                 "padding": "bucket"|"none"|"max", "placeholder_title": str?}
      "message" holds the body members other than kid/id/iat/sender (alert, exp, thread-id, ...).
      -> {"payload": "<payload JSON text>", "padded_length": P, "payload_bytes": n}
         or {"error": "..."} when the message cannot fit
  peer.py open  {"payload": "<payload JSON text>", "secret_key": b64, "trusted_senders": [b64 ed25519 pk],
                 "require_signature": bool, "now": int, "skew": int?}
      -> {"ok": true, "body": {...}, "padded_length": P, "payload_bytes": n, "signed_by": hex|null,
          "key_id": hex}
         or {"ok": false, "reason": "<reason code>", "detail": "..."}
"""
import base64
import binascii
import json
import sys

import nacl.bindings
import nacl.exceptions
import nacl.hash
import nacl.public
import nacl.signing
import nacl.utils

MAX_PAYLOAD = 4096
VERSION = 0x01
BUCKETS = (256, 512, 1024, 2048)
SEAL_OVERHEAD = 48  # ephemeral pk 32 + Poly1305 tag 16
HEADER = 1 + 8
SIG_CONTEXT = b"SealedPush-v1-sig\x00"


class Refused(Exception):
    def __init__(self, reason, detail):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def key_id(public_key: bytes) -> bytes:
    return nacl.hash.blake2b(public_key, digest_size=16, encoder=nacl.encoding.RawEncoder)[:8]


def b64decode_strict(text: str) -> bytes:
    if not isinstance(text, str) or any(c.isspace() for c in text):
        raise ValueError("not strict base64")
    raw = base64.b64decode(text, validate=True)
    if base64.b64encode(raw).decode() != text:  # padding required, canonical trailing bits
        raise ValueError("not canonical base64")
    return raw


def compact(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError("duplicate key")
        out[k] = v
    return out


def payload_object(title, encrypted):
    return {
        "aps": {"alert": {"title": title, "body": "(Encrypted)"}, "mutable-content": 1, "category": "SECRET"},
        "ENCRYPTED_DATA": encrypted,
    }


def largest_padded(overhead: int) -> int:
    budget = MAX_PAYLOAD - overhead
    return (budget // 4) * 3 - HEADER - SEAL_OVERHEAD


def choose_p(policy: str, inner_len: int, overhead: int):
    largest = largest_padded(overhead)
    if inner_len + 1 > largest:
        return None
    if policy == "none":
        return inner_len + 1
    if policy == "max":
        return largest
    for b in BUCKETS:
        if b > inner_len and b <= largest:
            return b
    return largest


def device_record(record) -> bytes:
    if record.get("type") != "sealedpush-device-key" or record.get("version") != 1:
        raise ValueError("not a version 1 device key record")
    pk = b64decode_strict(record["public_key"])
    if len(pk) != 32 or key_id(pk).hex() != record["key_id"]:
        raise ValueError("key_id does not match public_key")
    return pk


def cmd_keygen(_req):
    sk = nacl.public.PrivateKey.generate()
    pk = bytes(sk.public_key)
    kid = key_id(pk).hex()
    return {
        "secret_key": base64.b64encode(bytes(sk)).decode(),
        "public_key": base64.b64encode(pk).decode(),
        "key_id": kid,
        "record": {"type": "sealedpush-device-key", "version": 1, "key_id": kid,
                   "public_key": base64.b64encode(pk).decode(), "created_at": "2026-11-21T12:00:00Z"},
    }


def cmd_seal(req):
    pk = device_record(req["record"])
    kid = key_id(pk)
    body = {"kid": kid.hex(), "id": req.get("id") or base64.urlsafe_b64encode(nacl.utils.random(16)).decode().rstrip("="),
            "iat": int(req["now"])}
    body.update(req["message"])
    signer = None
    if req.get("signing_seed"):
        signer = nacl.signing.SigningKey(b64decode_strict(req["signing_seed"]))
        body["sender"] = key_id(bytes(signer.verify_key)).hex()
    body_bytes = compact(body)
    if len(body_bytes) > 0xFFFF:
        return {"error": "body over 65535 bytes"}
    inner = bytes([1 if signer else 0]) + len(body_bytes).to_bytes(2, "big") + body_bytes
    if signer:
        inner += signer.sign(SIG_CONTEXT + kid + body_bytes).signature
    title = req.get("placeholder_title", "Secret Message!")
    overhead = len(compact(payload_object(title, "")))
    p = choose_p(req.get("padding", "bucket"), len(inner), overhead)
    if p is None:
        minimal = overhead + 4 * -(-(HEADER + SEAL_OVERHEAD + len(inner) + 1) // 3)
        return {"error": f"payload would be {minimal} bytes, over the limit of {MAX_PAYLOAD}"}
    padded = inner + b"\x80" + b"\x00" * (p - len(inner) - 1)
    box = nacl.public.SealedBox(nacl.public.PublicKey(pk)).encrypt(padded)
    envelope = bytes([VERSION]) + kid + bytes(box)
    payload = compact(payload_object(title, base64.b64encode(envelope).decode()))
    assert len(payload) <= MAX_PAYLOAD
    return {"payload": payload.decode("utf-8"), "padded_length": p, "payload_bytes": len(payload)}


def open_payload(req):
    payload_bytes = req["payload"].encode("utf-8")
    # 1. payload and envelope shape
    try:
        payload = json.loads(payload_bytes, object_pairs_hook=no_duplicates)
        data = payload["ENCRYPTED_DATA"]
        envelope = b64decode_strict(data)
    except Exception:
        raise Refused("malformedPayload", "ENCRYPTED_DATA missing or not strict base64")
    if len(envelope) < HEADER + SEAL_OVERHEAD + 1:
        raise Refused("malformedPayload", "envelope too short")
    if envelope[0] != VERSION:
        raise Refused("unsupportedVersion", f"version {envelope[0]}")
    kid = envelope[1:9]
    # 2. key lookup
    sk = nacl.public.PrivateKey(b64decode_strict(req["secret_key"]))
    if key_id(bytes(sk.public_key)) != kid:
        raise Refused("unknownKey", "no key with this id")
    # 3. open
    try:
        padded = nacl.public.SealedBox(sk).decrypt(envelope[9:])
    except nacl.exceptions.CryptoError:
        raise Refused("decryptionFailed", "sealed box does not open")
    # 4. unpad
    stripped = padded.rstrip(b"\x00")
    if not stripped.endswith(b"\x80"):
        raise Refused("badPadding", "no 0x80 marker")
    inner = stripped[:-1]
    # 5. framing, JSON, members
    if len(inner) < 3:
        raise Refused("malformedMessage", "short inner message")
    flags, length = inner[0], int.from_bytes(inner[1:3], "big")
    if flags & ~1:
        raise Refused("malformedMessage", "unknown flags")
    signed = bool(flags & 1)
    if len(inner) != 3 + length + (64 if signed else 0):
        raise Refused("malformedMessage", "length does not add up")
    body_bytes = inner[3:3 + length]
    signature = inner[3 + length:] if signed else None
    try:
        body = json.loads(body_bytes.decode("utf-8"), object_pairs_hook=no_duplicates)
    except Exception:
        raise Refused("malformedMessage", "body is not UTF-8 JSON")
    check_members(body, signed)
    # 6. kid
    if body["kid"] != kid.hex():
        raise Refused("recipientMismatch", "kid differs from envelope key id")
    # 7. signature and policy
    signed_by = None
    if signed:
        trusted = {}
        for t in req.get("trusted_senders", []):
            vk = nacl.signing.VerifyKey(b64decode_strict(t))
            trusted[key_id(bytes(vk)).hex()] = vk
        vk = trusted.get(body["sender"])
        if vk is None:
            raise Refused("untrustedSender", "sender not trusted")
        try:
            vk.verify(SIG_CONTEXT + kid + body_bytes, signature)
        except nacl.exceptions.BadSignatureError:
            raise Refused("badSignature", "signature does not verify")
        signed_by = body["sender"]
    elif req.get("require_signature"):
        raise Refused("signatureRequired", "unsigned")
    # 8. time
    now, skew = int(req["now"]), int(req.get("skew", 300))
    if "exp" in body and now > body["exp"] + skew:
        raise Refused("expired", "expired")
    if body["iat"] > now + skew:
        raise Refused("notYetValid", "issued in the future")
    return {"ok": True, "body": body, "padded_length": len(padded), "payload_bytes": len(payload_bytes),
            "signed_by": signed_by, "key_id": kid.hex()}


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_kid(v):
    return isinstance(v, str) and len(v) == 16 and all(c in "0123456789abcdef" for c in v)


def check_members(body, signed):
    bad = lambda why: Refused("malformedMessage", why)
    if not isinstance(body, dict):
        raise bad("body is not an object")
    if not is_kid(body.get("kid")):
        raise bad("kid")
    if not isinstance(body.get("id"), str) or not 1 <= len(body["id"]) <= 64:
        raise bad("id")
    if not is_int(body.get("iat")):
        raise bad("iat")
    if "exp" in body and not is_int(body["exp"]):
        raise bad("exp")
    alert = body.get("alert")
    if not isinstance(alert, dict):
        raise bad("alert")
    texts = [alert[k] for k in ("title", "subtitle", "body") if k in alert]
    if not all(isinstance(t, str) for t in texts) or not any(texts):
        raise bad("alert text")
    for k in ("thread-id", "category", "sound"):
        if k in body and not isinstance(body[k], str):
            raise bad(k)
    if "badge" in body and not is_int(body["badge"]):
        raise bad("badge")
    if "data" in body and (not isinstance(body["data"], dict) or "aps" in body["data"]):
        raise bad("data")
    if "sender" in body and not is_kid(body["sender"]):
        raise bad("sender")
    if signed and "sender" not in body:
        raise bad("signed without sender")


def cmd_open(req):
    try:
        return open_payload(req)
    except Refused as r:
        return {"ok": False, "reason": r.reason, "detail": r.detail}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("keygen", "seal", "open"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    req = json.loads(sys.stdin.buffer.read() or b"{}")
    out = {"keygen": cmd_keygen, "seal": cmd_seal, "open": cmd_open}[sys.argv[1]](req)
    sys.stdout.write(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
