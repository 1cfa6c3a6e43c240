#!/usr/bin/env python3
"""The sender and receiver work of `sealedpush-bench`, done in Python with PyNaCl, side by side.

PyNaCl is what a server team would otherwise use (Tests/Peer/peer.py is the independent wire v1
peer this builds on). Every figure is operations per second of the fastest of several timed rounds
after a warm-up, on one CPU, and its ratio to the raw PyNaCl SealedBox loop run in alternating rounds
beside it (sender figures to raw seal, receiver figures to raw open), with the 256-byte padded bucket;
the raw rows show the fastest raw rounds of the run.

  raw_seal, raw_open               nacl.public.SealedBox encrypt / decrypt of 256 bytes
  sender_seal_{unsigned,signed}    complete payloads: body JSON, framing, signature, padding, sealed box,
                                   envelope, base64, payload JSON, size check
  sender_batch_{unsigned,signed}   the same from JSONL request lines (record parsed and checked per line)
                                   to output lines, as `sealedpush seal --batch` does, one thread
  receiver_open_warm_N_retired     payload JSON, base64, envelope, key lookup in a dict of N+1 keys,
                                   open, unpad, framing, body JSON and member checks, recipient, time
  receiver_open_cold_N_retired     the same, the key object rebuilt from its 32 stored bytes per message
                                   (Python has no keychain; this is what a fresh process would at least do)
  receiver_open_warm_signed_N_retired, receiver_open_warm_oldest_key_N_retired   as in the Swift bench

Usage:
  bench_pynacl.py                       run `sealedpush-bench --json` (SEALEDPUSH_BENCH_BIN, else
                                        Benchmarks/.build/release/sealedpush-bench) and print one combined table
  bench_pynacl.py --swift-json FILE     combine with a Swift run saved earlier (what `make bench` does)
  bench_pynacl.py --no-swift            PyNaCl figures only
  --quick                               tiny counts (checks that it runs)   --json   print JSON instead
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "Peer"))

import nacl.public  # noqa: E402
import nacl.signing  # noqa: E402
import nacl.utils  # noqa: E402

import peer  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MESSAGE = {"alert": {"title": "Agent K", "body": "The eagle lands at noon."}}


# ---------------------------------------------------------------------------------------------
# Timing

class Plan:
    def __init__(self, warmup, round_, rounds, minimum):
        self.warmup, self.round, self.rounds, self.minimum = warmup, round_, rounds, minimum


FULL = Plan(0.05, 0.10, 5, 20)
QUICK = Plan(0.0, 0.0, 1, 3)


def measure(plan, body):
    """Ops/s of the fastest round of body(n), which performs n operations."""
    done, spent, batch = 0, 0.0, 1
    while True:
        t = time.perf_counter()
        body(batch)
        spent += time.perf_counter() - t
        done += batch
        batch = min(batch * 2, 4096)
        if spent >= plan.warmup:
            break
    per_op = max(spent / done, 1e-9)
    n = max(plan.minimum, int(round(plan.round / per_op)))
    best = 0.0
    for _ in range(max(plan.rounds, 1)):
        t = time.perf_counter()
        body(n)
        best = max(best, n / max(time.perf_counter() - t, 1e-9))
    return best


def measure_paired(plan, floor, work):
    """(work ops/s, floor ops/s) from alternating rounds, so both come from the same stretch of time."""
    def calibrate(body):
        done, spent, batch = 0, 0.0, 1
        while True:
            t = time.perf_counter()
            body(batch)
            spent += time.perf_counter() - t
            done += batch
            batch = min(batch * 2, 4096)
            if spent >= plan.warmup:
                break
        return max(plan.minimum, int(round(plan.round / max(spent / done, 1e-9))))

    nf, nw = calibrate(floor), calibrate(work)
    best_floor = best_work = 0.0
    for _ in range(max(plan.rounds, 1)):
        t = time.perf_counter()
        floor(nf)
        best_floor = max(best_floor, nf / max(time.perf_counter() - t, 1e-9))
        t = time.perf_counter()
        work(nw)
        best_work = max(best_work, nw / max(time.perf_counter() - t, 1e-9))
    return best_work, best_floor


def pin_to_one_cpu():
    if not hasattr(os, "sched_getaffinity"):
        return None
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


# ---------------------------------------------------------------------------------------------
# Sender

def make_record(pk):
    kid = peer.key_id(pk).hex()
    return {"type": "sealedpush-device-key", "version": 1, "key_id": kid,
            "public_key": base64.b64encode(pk).decode(), "created_at": "2026-11-21T12:00:00Z"}


class Sender:
    def __init__(self, signer=None, title="Secret Message!"):
        self.signer = signer
        self.sender_kid = peer.key_id(bytes(signer.verify_key)).hex() if signer else None
        self.title = title
        self.overhead = len(peer.compact(peer.payload_object(title, "")))

    def seal(self, pk, kid, message, now):
        body = {"kid": kid.hex(), "id": base64.urlsafe_b64encode(nacl.utils.random(16)).decode().rstrip("="), "iat": now}
        body.update(message)
        if self.signer:
            body["sender"] = self.sender_kid
        body_bytes = peer.compact(body)
        if len(body_bytes) > 0xFFFF:
            raise ValueError("body over 65535 bytes")
        inner = bytes([1 if self.signer else 0]) + len(body_bytes).to_bytes(2, "big") + body_bytes
        if self.signer:
            inner += self.signer.sign(peer.SIG_CONTEXT + kid + body_bytes).signature
        p = peer.choose_p("bucket", len(inner), self.overhead)
        if p is None:
            raise ValueError("message does not fit")
        padded = inner + b"\x80" + b"\x00" * (p - len(inner) - 1)
        box = nacl.public.SealedBox(nacl.public.PublicKey(pk)).encrypt(padded)
        envelope = bytes([peer.VERSION]) + kid + bytes(box)
        payload = peer.compact(peer.payload_object(self.title, base64.b64encode(envelope).decode()))
        if len(payload) > peer.MAX_PAYLOAD:
            raise ValueError("payload over 4096 bytes")
        return payload, p

    def seal_line(self, line, now):
        """One JSONL request line -> one output line, as `sealedpush seal --batch` writes them."""
        try:
            req = json.loads(line, object_pairs_hook=peer.no_duplicates)
            pk = peer.device_record(req["to"])
            message = {"alert": {k: req[k] for k in ("title", "subtitle", "body") if k in req}}
            for k, wire in (("thread_id", "thread-id"), ("category", "category"), ("sound", "sound"), ("badge", "badge"), ("data", "data")):
                if k in req:
                    message[wire] = req[k]
            # The default expiry of 7 days (exp in the body, apns-expiration in the headers), as in Swift.
            exp = now + 7 * 86400
            message["exp"] = exp
            payload, _ = self.seal(pk, peer.key_id(pk), message, now)
            return (b'{"payload":' + payload + b',"headers":{"apns-push-type":"alert","apns-priority":"10","apns-expiration":"'
                    + str(exp).encode() + b'"}}\n')
        except Exception as e:  # noqa: BLE001 - a failed line becomes an error line, as in Swift
            return peer.compact({"line": 0, "error": str(e)}) + b"\n"


# ---------------------------------------------------------------------------------------------
# Receiver

class Receiver:
    """A device with `retired + 1` keys; opens like peer.open_payload, with a key dict instead of one key."""

    def __init__(self, retired, trusted_signer):
        self.secrets = {}
        keys = [nacl.public.PrivateKey.generate() for _ in range(retired + 1)]
        self.keys = {peer.key_id(bytes(k.public_key)): k for k in keys}
        self.secrets = {kid: bytes(k) for kid, k in self.keys.items()}
        self.oldest = keys[0]
        self.active = keys[-1]
        vk = trusted_signer.verify_key
        self.trusted = {peer.key_id(bytes(vk)).hex(): vk}

    def open(self, payload_bytes, now, cold=False):
        payload = json.loads(payload_bytes, object_pairs_hook=peer.no_duplicates)
        envelope = peer.b64decode_strict(payload["ENCRYPTED_DATA"])
        if len(envelope) < peer.HEADER + peer.SEAL_OVERHEAD + 1 or envelope[0] != peer.VERSION:
            raise peer.Refused("malformedPayload", "envelope")
        kid = envelope[1:9]
        if cold:
            secret = self.secrets.get(kid)
            sk = nacl.public.PrivateKey(secret) if secret is not None else None
        else:
            sk = self.keys.get(kid)
        if sk is None:
            raise peer.Refused("unknownKey", "no key with this id")
        padded = nacl.public.SealedBox(sk).decrypt(envelope[9:])
        stripped = padded.rstrip(b"\x00")
        if not stripped.endswith(b"\x80"):
            raise peer.Refused("badPadding", "no 0x80 marker")
        inner = stripped[:-1]
        flags, length = inner[0], int.from_bytes(inner[1:3], "big")
        signed = bool(flags & 1)
        if flags & ~1 or len(inner) != 3 + length + (64 if signed else 0):
            raise peer.Refused("malformedMessage", "framing")
        body_bytes = inner[3:3 + length]
        body = json.loads(body_bytes.decode("utf-8"), object_pairs_hook=peer.no_duplicates)
        peer.check_members(body, signed)
        if body["kid"] != kid.hex():
            raise peer.Refused("recipientMismatch", "kid")
        if signed:
            vk = self.trusted.get(body["sender"])
            if vk is None:
                raise peer.Refused("untrustedSender", "sender")
            vk.verify(peer.SIG_CONTEXT + kid + body_bytes, inner[3 + length:])
        if "exp" in body and now > body["exp"] + 300:
            raise peer.Refused("expired", "expired")
        if body["iat"] > now + 300:
            raise peer.Refused("notYetValid", "future")
        return body


# ---------------------------------------------------------------------------------------------

def run_pynacl(plan, retired_counts, progress=True):
    def say(text):
        if progress:
            print("bench_pynacl: " + text, file=sys.stderr)

    results = []
    say("raw SealedBox loops")
    device = nacl.public.PrivateKey.generate()
    pk = bytes(device.public_key)
    kid = peer.key_id(pk)
    msg = nacl.utils.random(256)
    seal_box = nacl.public.SealedBox(device.public_key)
    open_box = nacl.public.SealedBox(device)
    sealed = seal_box.encrypt(msg)

    def raw_seal(n):
        for _ in range(n):
            seal_box.encrypt(msg)

    def raw_open(n):
        for _ in range(n):
            open_box.decrypt(sealed)

    loops = {"seal": raw_seal, "open": raw_open}
    floor = {"seal": measure(plan, raw_seal), "open": measure(plan, raw_open)}

    def add(name, kind, body):
        ops, floor_ops = measure_paired(plan, loops[kind], body)
        floor[kind] = max(floor[kind], floor_ops)
        results.append((name, ops, ops / floor_ops))

    say("sender")
    signer = nacl.signing.SigningKey.generate()
    unsigned, signed = Sender(), Sender(signer)
    now = int(time.time())
    for s in (unsigned, signed):
        _, p = s.seal(pk, kid, MESSAGE, now)
        if p != 256:
            print(f"bench_pynacl: note: the benchmark message padded to {p} bytes, not 256", file=sys.stderr)
    record = make_record(pk)
    lines = [peer.compact({"to": record, "title": "Agent K", "body": "The eagle lands at noon.", "thread_id": f"ops-{n % 8}"})
             for n in range(64)]

    def single(sender):
        def body(n):
            for _ in range(n):
                sender.seal(pk, kid, MESSAGE, now)
        return body

    def batch(sender):
        def body(n):
            out = []
            for i in range(n):
                out.append(sender.seal_line(lines[i % len(lines)], now))
                if len(out) > 4096:
                    out.clear()
            if out and b'"error"' in out[-1]:
                raise RuntimeError(out[-1].decode())
        return body

    add("sender_seal_unsigned", "seal", single(unsigned))
    add("sender_seal_signed", "seal", single(signed))
    add("sender_batch_unsigned", "seal", batch(unsigned))
    add("sender_batch_signed", "seal", batch(signed))

    for count in retired_counts:
        say(f"receiver with {count} retired key(s)")
        receiver = Receiver(count, signer)
        active_pk = bytes(receiver.active.public_key)
        oldest_pk = bytes(receiver.oldest.public_key)
        pool = [unsigned.seal(active_pk, peer.key_id(active_pk), MESSAGE, now)[0] for _ in range(32)]
        pool_signed = [signed.seal(active_pk, peer.key_id(active_pk), MESSAGE, now)[0] for _ in range(32)]
        pool_oldest = [unsigned.seal(oldest_pk, peer.key_id(oldest_pk), MESSAGE, now)[0] for _ in range(32)]

        def opens(payloads, cold=False):
            def body(n):
                for i in range(n):
                    receiver.open(payloads[i % len(payloads)], now, cold)
            return body

        add(f"receiver_open_warm_{count}_retired", "open", opens(pool))
        add(f"receiver_open_cold_{count}_retired", "open", opens(pool, cold=True))
        add(f"receiver_open_warm_signed_{count}_retired", "open", opens(pool_signed))
        if count == retired_counts[-1]:
            add(f"receiver_open_warm_oldest_key_{count}_retired", "open", opens(pool_oldest))
    results = [("raw_seal", floor["seal"], 1.0), ("raw_open", floor["open"], 1.0)] + results
    return [{"name": n, "ops_per_second": round(o, 1), "ratio_to_raw": round(r, 3)} for n, o, r in results]


def load_swift(args):
    if args.no_swift:
        return None
    if args.swift_json:
        with open(args.swift_json, "rb") as f:
            return json.load(f)
    binary = args.sealedpush or os.environ.get("SEALEDPUSH_BENCH_BIN") or os.path.join(ROOT, "Benchmarks", ".build", "release", "sealedpush-bench")
    if not os.access(binary, os.X_OK):
        print(f"bench_pynacl: no sealedpush binary at {binary}; build it (make bench) or pass --sealedpush / --no-swift",
              file=sys.stderr)
        sys.exit(1)
    cmd = [binary, "--json"] + (["--quick"] if args.quick else [])
    done = subprocess.run(cmd, stdout=subprocess.PIPE, check=True)
    return json.loads(done.stdout)


def retired_counts_from(swift, quick):
    counts = []
    if swift:
        for r in swift["results"]:
            name = r["name"]
            if name.startswith("receiver_open_warm_") and name.endswith("_retired") and name.count("_") == 4:
                counts.append(int(name.split("_")[3]))
    return sorted(set(counts)) or ([1, 2, 3] if quick else [1, 10, 1000])


def fmt_ops(x):
    return "—" if x is None else f"{x:,.0f}"


def fmt_ratio(x):
    return "—" if x is None else f"{x:.3f}×"


def print_table(swift, py, cpu):
    by_name_swift = {r["name"]: r for r in swift["results"]} if swift else {}
    by_name_py = {r["name"]: r for r in py}
    names = [r["name"] for r in swift["results"]] if swift else []
    names += [n for n in by_name_py if n not in by_name_swift]
    if swift:
        env = swift.get("environment", {})
        print("Swift run:  " + ", ".join(f"{k}={v}" for k, v in env.items()))
    import nacl
    print(f"PyNaCl run: pynacl={nacl.__version__}, python={sys.version.split()[0]}, pinned_cpu={cpu}")
    print()
    width = max(len(n) for n in names) + 2
    header = f"{'name':<{width}}{'Swift ops/s':>13}{'Swift ratio':>13}{'PyNaCl ops/s':>14}{'PyNaCl ratio':>14}{'Swift/PyNaCl':>14}"
    print(header)
    print("-" * len(header))
    for n in names:
        s, p = by_name_swift.get(n), by_name_py.get(n)
        so, po = (s or {}).get("ops_per_second"), (p or {}).get("ops_per_second")
        speedup = f"{so / po:.2f}×" if so and po else "—"
        print(f"{n:<{width}}{fmt_ops(so):>13}{fmt_ratio((s or {}).get('ratio_to_raw')):>13}"
              f"{fmt_ops(po):>14}{fmt_ratio((p or {}).get('ratio_to_raw')):>14}{speedup:>14}")
    print()
    print("Ratios are to the raw loop of the same language's run (Swift: libsodium crypto_box_seal/_open called")
    print("directly; PyNaCl: nacl.public.SealedBox), sender rows to raw_seal, receiver rows to raw_open.")
    if swift:
        print()
        print("Swift memory:")
        for k, v in swift.get("memory", {}).items():
            print(f"  {k}: {v}")
        print()
        print("Targets (Swift):")
        for t in swift.get("targets", []):
            print(f"  [{'met' if t['met'] else 'NOT met'}] {t['name']}: {t['detail']}")
        for note in swift.get("notes", []):
            print(f"note: {note}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--swift-json", help="a saved `sealedpush-bench --json` output to compare with")
    ap.add_argument("--sealedpush", help="the sealedpush-bench binary to run (default: SEALEDPUSH_BENCH_BIN, else Benchmarks/.build/release/sealedpush-bench)")
    ap.add_argument("--no-swift", action="store_true", help="PyNaCl figures only")
    ap.add_argument("--quick", action="store_true", help="tiny counts: checks that everything runs")
    ap.add_argument("--json", action="store_true", help="print {\"swift\": …, \"pynacl\": {\"results\": […]}}")
    args = ap.parse_args()

    cpu = pin_to_one_cpu()
    swift = load_swift(args)
    py = run_pynacl(QUICK if args.quick else FULL, retired_counts_from(swift, args.quick), progress=not args.json)
    if args.json:
        print(json.dumps({"swift": swift, "pynacl": {"results": py}}))
    else:
        print_table(swift, py, cpu)


if __name__ == "__main__":
    main()
