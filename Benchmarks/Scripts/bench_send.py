#!/usr/bin/env python3
"""`make bench` (issue #12): delivery throughput through a local APNs on loopback.

1. `sealedpush send --batch` of N sealed pushes (default 20 000) to `sealedpush-server apns serve --accept-unknown`
   (no devices), pushes/s, and its ratio to the raw crypto_box_seal loop (`sealedpush-bench --profile raw_seal`)
   measured in the same run. Target >= 0.6x on this 2-core machine with the server sharing it.
2. The same N pushes from Python: PyNaCl sealing per the spec (Benchmarks/Scripts/bench_pynacl.py's Sender) and aioapns
   (the APNs client Matrix's Sygnal uses) against the same local APNs. Target: SealedPush >= 3x.
3. Peak RSS of `send` over N/10 and N lines: flat means streaming (target: the larger run within 25 % + 2 MiB).

Each target is printed as met or NOT met; nothing is asserted.
"""
import argparse
import asyncio
import base64
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "..", "..", "Tests", "Peer")  # peer.py, the independent wire v1 implementation
sys.path.insert(0, HERE)
sys.path.insert(0, PEER)


def cpu_seconds(pid):
    """User + system CPU time of a running process so far (from /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


LAST_CHILD_CPU = [0.0]


def run_child(argv, cwd, stdout=subprocess.DEVNULL):
    """Runs argv to completion; returns (exit status, wall seconds, peak RSS in KiB). Its user + system CPU
    seconds (wait4's rusage of that child alone) are left in LAST_CHILD_CPU[0]."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    LAST_CHILD_CPU[0] = usage.ru_utime + usage.ru_stime
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(f"  {argv[1]} exited {code}: {err.strip()[-400:]}", file=sys.stderr)
    return code, elapsed, usage.ru_maxrss


def write_batch(path, record, n):
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"to": record, "title": "Agent K", "body": f"Message {i}: the eagle lands at noon.",
                                "device_token": f"{i:064x}"}) + "\n")


def python_run(pyexe, ca, port, key_pem, record, n, concurrency):
    """PyNaCl + aioapns in a child process (its own interpreter, as a server team would run it)."""
    script = r'''
import asyncio, json, os, ssl, sys, time
sys.path[:0] = sys.argv[1].split(os.pathsep)
import bench_pynacl, peer
from aioapns import APNs, NotificationRequest
from aioapns import connection as conn
ca, port, key_pem, record, n, concurrency = sys.argv[2], int(sys.argv[3]), sys.argv[4], json.loads(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
conn.APNsProductionClientProtocol.APNS_SERVER = "127.0.0.1"
conn.APNsProductionClientProtocol.APNS_PORT = port
async def main():
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(["h2"])
    apns = APNs(key=key_pem, key_id="BENCH00KEY", team_id="BENCHTEAM0", topic="com.example.bench",
                use_sandbox=False, ssl_context=context, max_connections=1)
    sender = bench_pynacl.Sender()
    pk = peer.device_record(record)
    kid = peer.key_id(pk)
    sem = asyncio.Semaphore(concurrency)
    ok = 0
    async def one(i):
        nonlocal ok
        async with sem:
            now = int(time.time())
            payload, _ = sender.seal(pk, kid, {"alert": {"title": "Agent K", "body": f"Message {i}: the eagle lands at noon."},
                                               "exp": now + 7 * 86400}, now)
            request = NotificationRequest(device_token=f"{i:064x}", message=json.loads(payload), time_to_live=7 * 86400)
            try:
                result = await apns.send_notification(request)
            except Exception:  # aioapns gives up on a push after 5 attempts: counted as not accepted
                return
            if result.is_successful:
                ok += 1
    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    print(json.dumps({"ok": ok, "seconds": time.perf_counter() - start}))
asyncio.run(main())
'''
    out = subprocess.run([pyexe, "-c", script, HERE + os.pathsep + PEER, ca, str(port), key_pem, json.dumps(record),
                          str(n), str(concurrency)], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip()[-600:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="the sealedpush binary (send)")
    ap.add_argument("--server-bin", required=True, help="the sealedpush-server binary (apns serve)")
    ap.add_argument("--bench-bin", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("-n", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=100)
    args = ap.parse_args()
    n = args.n
    work = tempfile.mkdtemp(prefix="sealedpush-bench-send-")
    sp = os.path.abspath(args.bin)
    server_bin = os.path.abspath(args.server_bin)
    subprocess.run([server_bin, "apns", "generate-key", "--key-id", "BENCH00KEY", "--out", work], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sp, "keys", "generate", "--keychain", os.path.join(work, "phone")], check=True, stdout=subprocess.DEVNULL)
    record = json.loads(subprocess.run([sp, "keys", "export", "--keychain", os.path.join(work, "phone")], check=True,
                                       capture_output=True, text=True).stdout)
    key_path = os.path.join(work, "AuthKey_BENCH00KEY.p8")
    with open(key_path) as f:
        key_pem = f.read()
    write_batch(os.path.join(work, "batch.jsonl"), record, n)
    write_batch(os.path.join(work, "small.jsonl"), record, max(1, n // 10))

    server = subprocess.Popen([server_bin, "apns", "serve", "--public-key", key_path.replace(".p8", ".pub.pem"), "--team-id", "BENCHTEAM0", "--topic", "com.example.bench",
                               "--accept-unknown", "--listen", "127.0.0.1:0", "--ca-out", os.path.join(work, "ca.pem")],
                              cwd=work, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()
        url = line.split()[2]
        port = int(url.rsplit(":", 1)[1])
        send = [sp, "send", "--auth-key", key_path, "--team-id", "BENCHTEAM0", "--topic", "com.example.bench", "--environment", url,
                "--ca-cert", os.path.join(work, "ca.pem"), "--concurrency", str(args.concurrency)]
        # Warm-up (page cache, connection set-up paths), then the measured runs.
        run_child(send + ["--batch", "small.jsonl"], work)
        server_cpu0 = cpu_seconds(server.pid)
        code, seconds, rss_big = run_child(send + ["--batch", "batch.jsonl"], work)
        send_cpu_us = LAST_CHILD_CPU[0] / n * 1e6
        server_cpu_us = (cpu_seconds(server.pid) - server_cpu0) / n * 1e6
        swift_rate = n / seconds if code == 0 else 0.0
        _, _, rss_small = run_child(send + ["--batch", "small.jsonl"], work)
        raw_start = time.perf_counter()
        subprocess.run([os.path.abspath(args.bench_bin), "--profile", "raw_seal", "--iterations", str(n)], check=True)
        raw_rate = n / (time.perf_counter() - raw_start)
        try:
            py = python_run(args.python, os.path.join(work, "ca.pem"), port, key_pem, record, n, args.concurrency)
            py_rate = py["ok"] / py["seconds"] if py["ok"] > 0 else 0.0
            py_note = f"{py['ok']} of {n} accepted"
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            py_rate, py_note = None, f"not run: {e}"
    finally:
        server.kill()
        server.wait()

    def verdict(ok):
        return "met" if ok else "NOT met"

    print(f"\nDelivery through the local APNs ({n} pushes, --concurrency {args.concurrency}, server on the same 2 cores)")
    print(f"  sealedpush send --batch      {swift_rate:10.0f} pushes/s   ({seconds:.2f} s, exit {code})")
    print(f"  raw crypto_box_seal loop     {raw_rate:10.0f} ops/s")
    ratio = swift_rate / raw_rate if raw_rate else 0
    print(f"  send / raw seal              {ratio:10.2f}x   target >= 0.6x: {verdict(ratio >= 0.6)}")
    if py_rate is None:
        print(f"  PyNaCl + aioapns             {py_note}   target SealedPush >= 3x: NOT measured")
    else:
        speedup = swift_rate / py_rate if py_rate else float("inf")
        print(f"  PyNaCl + aioapns             {py_rate:10.0f} pushes/s   ({py_note})")
        print(f"  SealedPush / Python          {speedup:10.2f}x   target >= 3x: {verdict(speedup >= 3)}")
    print(f"  send CPU per push            {send_cpu_us:10.0f} us   target <= 120 us: {verdict(send_cpu_us <= 120)}"
          f"   (the local APNs: {server_cpu_us:.0f} us per push)")
    flat = rss_big <= rss_small * 1.25 + 2048
    print(f"  send peak RSS                {rss_small / 1024:6.1f} MiB ({max(1, n // 10)} lines) -> {rss_big / 1024:6.1f} MiB ({n} lines)"
          f"   flat: {verdict(flat)}")


if __name__ == "__main__":
    main()
