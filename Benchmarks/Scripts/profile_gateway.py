#!/usr/bin/env python3
"""Where the gateway's CPU goes by caller (`make profile-gateway`), for single messages on SQLite under wrk, as
`make bench-gateway` loads it: `perf record -g` on the gateway process for --seconds of wrk, then every sample
counted under the innermost frame of its stack that belongs to one of the callers below (Swift symbols
demangled with `swift demangle`). Also the gateway's CPU per message over the same window, the figure
`make bench-gateway` divides by.

Needs `perf` (linux-perf) and root (or kernel.perf_event_paranoid <= 1). The release binaries carry frame
pointers on x86-64 Linux, which `perf record -g` walks; frames it cannot name count as "other".
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gateway import Gateway, cpu_seconds, gateway_config, make_keys, register, start_apns, wrk, write_config  # noqa: E402

# (caller, pattern on a demangled frame), tried in this order on each frame from the innermost out.
CALLERS = [
    ("sealing (libsodium, the sealer)", re.compile(r"crypto_box|crypto_scalarmult|sodium|salsa|poly1305|curve25519|ladder|fe25519|ge25519|x25519|blake2|SealedPushCrypto|Sealer|Field25519")),
    ("SQLite's C code (sqlite3*)", re.compile(r"^sqlite3|sqlite3VdbeExec|sqlite3Btree|sqlite3Pager")),
    ("the SQLite store (GRDB and the store's Swift)", re.compile(r"GRDB|SQLiteGatewayStore|WriteQueue")),
    ("the APNs client (HTTP/2, HPACK, TLS)", re.compile(r"SealedPushAPNs|NIOHTTP2|HPACK|NIOSSL|CNIOBoringSSL|boringssl|APNsPlatformSender")),
    ("Hummingbird's HTTP/1 server", re.compile(r"Hummingbird|NIOHTTP1|HTTPParser|llhttp|http_parser")),
    ("the delivery worker", re.compile(r"DeliveryWorker|DeliveryStateMachine|claimDue")),
    ("the message handler (validation, ids, JSON)", re.compile(r"SealedPushGateway|SealedPushWire|JSON")),
    ("Logging and metrics", re.compile(r"Logging\.|Metrics|Prometheus")),
    ("NIO's event loops and sockets", re.compile(r"NIOPosix|NIOCore|SelectableEventLoop|epoll_wait|SocketChannel")),
    ("Swift concurrency's runtime", re.compile(r"swift_task|swift_job|swift::|Concurrency|swift_continuation")),
]


def classify(stacks):
    counts = collections.Counter()
    anywhere = collections.Counter()
    watch = {"fdatasync": re.compile(r"fdatasync"), "pwrite": re.compile(r"pwrite"), "malloc/free": re.compile(r"^(malloc|free|_int_malloc|_int_free|cfree)"),
             "swift_retain/release": re.compile(r"swift_(retain|release|bridgeObjectRetain|bridgeObjectRelease)")}
    for frames in stacks:
        label = "other (the kernel, libc, frames with no named caller)"
        for frame in frames:
            hit = next((name for name, pattern in CALLERS if pattern.search(frame)), None)
            if hit:
                label = hit
                break
        counts[label] += 1
        for name, pattern in watch.items():
            if any(pattern.search(f) for f in frames):
                anywhere[name] += 1
    return counts, anywhere


def read_stacks(perf_data, work):
    """The stacks of perf_data, innermost frame first, each frame's symbol demangled."""
    script = subprocess.run(["perf", "script", "-i", perf_data, "-F", "ip,sym"], cwd=work, capture_output=True, text=True).stdout
    demangled = subprocess.run(["swift", "demangle", "--simplified"], input=script, capture_output=True, text=True).stdout \
        if shutil.which("swift") else script
    stacks, frames = [], []
    for line in demangled.splitlines():
        line = line.strip()
        if not line:
            if frames:
                stacks.append(frames)
            frames = []
            continue
        parts = line.split(None, 1)
        frames.append(parts[1] if len(parts) > 1 else parts[0])
    if frames:
        stacks.append(frames)
    return stacks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--server-bin", required=True)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--frequency", type=int, default=999)
    ap.add_argument("--top", type=int, default=30, help="how many of the hottest functions to list")
    args = ap.parse_args()
    if not shutil.which("perf"):
        print("perf is missing: apt-get install linux-perf", file=sys.stderr)
        return 1
    sp, server_bin = os.path.abspath(args.bin), os.path.abspath(args.server_bin)
    work = tempfile.mkdtemp(prefix="sealedpush-profile-gateway-")
    key_path, record = make_keys(sp, server_bin, work)
    apns, url, apns_log = start_apns(server_bin, work, key_path)
    gateway = None
    try:
        config = write_config(work, gateway_config(url, key_path, "sqlite:gateway.db", os.path.join(work, "ca.pem")))
        gateway = Gateway(server_bin, config, work)
        register(gateway, args.users, record)
        perf_data = os.path.join(work, "perf.data")
        perf = subprocess.Popen(["perf", "record", "-F", str(args.frequency), "-g", "-p", str(gateway.proc.pid), "-o", perf_data],
                                cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        cpu0 = cpu_seconds(gateway.proc.pid)
        requests, errors, p50, p99, _ = wrk(gateway.port, args.seconds, args.users, work)
        posted = requests - errors
        gateway.wait_drained(posted)
        cpu = cpu_seconds(gateway.proc.pid) - cpu0
        perf.send_signal(2)
        perf.wait(60)
        stacks = read_stacks(perf_data, work)
    finally:
        if gateway:
            gateway.proc.terminate()
            gateway.proc.wait()
        apns.terminate()
        apns.wait()
        apns_log.close()
    counts, anywhere = classify(stacks)
    total = max(1, sum(counts.values()))
    print(f"\nThe gateway on SQLite under wrk -c 32 for {args.seconds} s: {posted} messages, {cpu / max(1, posted) * 1e6:.0f} µs of "
          f"gateway CPU per message (POST p50 {p50:.1f} ms, p99 {p99:.1f} ms); {total} samples at {args.frequency} Hz")
    print("| caller (innermost on the stack) | share of gateway CPU |\n|---|---|")
    for name, n in counts.most_common():
        print(f"| {name} | {n / total:.1%} |")
    print("Anywhere on the stack: " + ", ".join(f"{name} {n / total:.1%}" for name, n in anywhere.most_common()))
    leaves = collections.Counter(re.sub(r"\+0x[0-9a-f]+$", "", frames[0])[:140] for frames in stacks if frames)
    print(f"\nThe {args.top} hottest functions by their own samples (the innermost frame):")
    for name, n in leaves.most_common(args.top):
        print(f"  {n / total:6.1%}  {name}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
