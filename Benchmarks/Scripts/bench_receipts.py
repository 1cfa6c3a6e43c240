#!/usr/bin/env python3
"""make bench, receipts rows (issue #14): prints each target with met / NOT met.

1. `device push` with a receipt to a collector on loopback, whole process, against the same push without a
   receipt: median wall time over alternating runs; target ratio <= 1.5.
2. The collector (`receipts serve`, SQLite on disk, WAL) under a load generator on loopback (this script:
   several keep-alive HTTP/1.1 connections, pipelined): receipts per second; target >= 5000, and the count of
   delivered messages in the database equals the receipts acknowledged (204).

Usage: bench_receipts.py --bin SEALEDPUSH --server-bin SEALEDPUSH_SERVER [--pushes N] [--receipts N]
"""
import argparse, asyncio, base64, hashlib, json, os, socket, sqlite3, statistics, subprocess, sys, tempfile, time


def run(binary, args, cwd):
    return subprocess.run([binary] + args, cwd=cwd, capture_output=True, check=True)


def start_collector(server_binary, cwd, db):
    proc = subprocess.Popen([server_binary, "receipts", "serve", "--db", db, "--listen", "127.0.0.1:0", "--max-rate", "1000000"],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = proc.stdout.readline().decode().strip()
    port = int(line.rsplit(":", 1)[1])
    return proc, port


def push_ratio(binary, cwd, port, n):
    payloads = []
    for i in range(n):
        with_receipt = run(binary, ["seal", "--to", "device.json", "--title", "Agent K", "--body", "bench %d" % i,
                                    "--receipt-url", "http://127.0.0.1:%d/r" % port, "--receipts-db", "r.sqlite"], cwd).stdout
        without = run(binary, ["seal", "--to", "device.json", "--title", "Agent K", "--body", "bench %d" % i], cwd).stdout
        for name, data in (("w%d.json" % i, with_receipt), ("o%d.json" % i, without)):
            with open(os.path.join(cwd, name), "wb") as f:
                f.write(data)
        payloads.append(("w%d.json" % i, "o%d.json" % i))
    times = {"with": [], "without": []}
    for w, o in payloads:
        for kind, name in (("with", w), ("without", o)):
            t = time.perf_counter()
            out = run(binary, ["device", "push", "--keychain", "dev", "--json", name], cwd).stdout
            times[kind].append(time.perf_counter() - t)
            result = json.loads(out)
            if kind == "with" and result.get("receipt") != "sent":
                sys.exit("receipt not sent: %s" % result)
    return statistics.median(times["with"]), statistics.median(times["without"])


async def load(port, bodies, connections, pipeline):
    acknowledged = 0
    other = 0
    chunks = [bodies[i::connections] for i in range(connections)]

    async def client(mine):
        nonlocal acknowledged, other
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for start in range(0, len(mine), pipeline):
            batch = mine[start:start + pipeline]
            writer.write(b"".join(b"POST /r HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                                  % (len(b), b) for b in batch))
            await writer.drain()
            buf = b""
            seen = 0
            while seen < len(batch):
                data = await reader.read(65536)
                if not data:
                    raise RuntimeError("connection closed")
                buf += data
                # Responses carry no body (204) or a Content-Length: 0 body: count complete heads.
                while b"\r\n\r\n" in buf:
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    if head.startswith(b"HTTP/1.1 204"):
                        acknowledged += 1
                    else:
                        other += 1
                    seen += 1
        writer.close()

    t = time.perf_counter()
    await asyncio.gather(*(client(c) for c in chunks))
    return acknowledged, other, time.perf_counter() - t


def collector_rate(binary, cwd, n):
    db = os.path.join(cwd, "load.sqlite")
    proc, port = start_collector(binary, cwd, db)
    try:
        con = sqlite3.connect(db, timeout=10)
        bodies = []
        rows = []
        for i in range(n):
            token = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
            mid = "load-%d" % i
            rows.append((mid, hashlib.sha256(token.encode()).digest(), int(time.time()), "e2a0cdd02cd5f429"))
            bodies.append(json.dumps({"v": 1, "type": "delivered", "id": mid, "token": token, "at": int(time.time())},
                                     separators=(",", ":")).encode())
        con.executemany("INSERT INTO expected (message_id, token_sha256, issued_at, key_id) VALUES (?, ?, ?, ?)", rows)
        con.commit()
        acknowledged, other, seconds = asyncio.run(load(port, bodies, connections=8, pipeline=32))
        counted = con.execute("SELECT COUNT(*) FROM expected WHERE receipts > 0 AND message_id LIKE 'load-%'").fetchone()[0]
        con.close()
        return acknowledged, other, seconds, counted
    finally:
        proc.kill()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="the sealedpush binary")
    ap.add_argument("--server-bin", required=True, help="the sealedpush-server binary (receipts serve)")
    ap.add_argument("--pushes", type=int, default=15)
    ap.add_argument("--receipts", type=int, default=20000)
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    server_binary = os.path.abspath(a.server_bin)
    with tempfile.TemporaryDirectory(prefix="sealedpush-bench-receipts-") as cwd:
        with open(os.path.join(cwd, "device.json"), "wb") as f:
            f.write(run(binary, ["keys", "generate", "--keychain", "dev"], cwd).stdout)
        proc, port = start_collector(server_binary, cwd, os.path.join(cwd, "r.sqlite"))
        try:
            with_r, without = push_ratio(binary, cwd, port, a.pushes)
        finally:
            proc.kill()
            proc.wait()
        ratio = with_r / without
        print("receipts_device_push: with receipt %.1f ms, without %.1f ms (median of %d), ratio %.2fx (target <= 1.5x): %s"
              % (with_r * 1000, without * 1000, a.pushes, ratio, "met" if ratio <= 1.5 else "NOT met"))
        acknowledged, other, seconds, counted = collector_rate(server_binary, cwd, a.receipts)
        rate = acknowledged / seconds
        ok = rate >= 5000 and counted == acknowledged and other == 0
        print("receipts_collector: %d receipts acknowledged in %.2f s = %.0f/s (target >= 5000/s), %d other answers, "
              "%d counted in the database (must equal acknowledged): %s"
              % (acknowledged, seconds, rate, other, counted, "met" if ok else "NOT met"))


if __name__ == "__main__":
    main()
