#!/usr/bin/env python3
"""The gateway's numbers (issue #20), each stated met or not:

1. Throughput: wrk (Debian) posts messages into `sealedpush-server gateway` on SQLite for --seconds, one device
   per user, delivered to `sealedpush-server apns serve --accept-unknown`; deliveries per second from the
   first request to the last delivery accepted, against `sealedpush send --batch` of the same number of pushes
   into the same local APNs in the same run. Target >= 0.5x. The p99 latency of POST /messages under that
   load (wrk --latency): target <= 50 ms.
2. Memory: the gateway's resident set sampled as the run goes on to --total messages (100 000): flat means the
   last sample is within 25% + 8 MiB of the sample at a quarter of the way.
3. kill -9 in the middle of a run: every message answered 202 reaches APNs after a restart; how many pushes
   went twice (same apns-id: the device's replay rule and iOS's collapse id hide them from the user).
4. Mailbox mode (issue #46 item 7, `--only mailbox` or `make bench-mailbox` runs it alone): a gateway of its own
   with the mailbox enabled, the same wrk load posting messages with "delivery": "push", then "delivery":
   "mailbox"; deliveries per second to the local APNs (`apns serve --capture`, counted in its capture file) for
   each. During the mailbox run the script is the phones: it reads each handle from what the local APNs received
   and POSTs /v1/mailbox/fetch (--fetchers threads, keep-alive), timing each fetch. Reports the fetch p50/p99
   under that load and the gateway's CPU per fetched message. Targets: mailbox >= 0.8x push mode, fetch p99 <= 50 ms.

Everything runs on this machine's cores at once (wrk, the gateway, the local APNs): the figures are for
that, not for a gateway alone on a server.
"""

import argparse
import http.client
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

API_KEY = "sp_" + "Bench0Key1Bench0Key2Bench0Key3Bench0Key4"


def verdict(ok):
    return "met" if ok else "NOT met"


def cpu_seconds(pid):
    """User + system CPU time of a process so far (from /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def make_keys(sp, server_bin, work):
    """An APNs signing key (AuthKey_BENCH00KEY.p8 in work) and a phone's key record; (key path, record)."""
    subprocess.run([server_bin, "apns", "generate-key", "--key-id", "BENCH00KEY", "--out", work], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sp, "keys", "generate", "--keychain", os.path.join(work, "phone")], check=True, stdout=subprocess.DEVNULL)
    record = json.loads(subprocess.run([sp, "keys", "export", "--keychain", os.path.join(work, "phone")], check=True,
                                       capture_output=True, text=True).stdout)
    return os.path.join(work, "AuthKey_BENCH00KEY.p8"), record


def start_apns(server_bin, work, key_path, log_name="apns.log", extra=()):
    """`sealedpush-server apns serve --accept-unknown` (and `extra` options) logging each push to work/log_name (CA
    in work/ca.pem); (process, URL, log file)."""
    apns_log = open(os.path.join(work, log_name), "wb")
    apns = subprocess.Popen([server_bin, "apns", "serve", "--public-key", key_path.replace(".p8", ".pub.pem"), "--team-id", "BENCHTEAM0", "--topic", "com.example.bench",
                             "--accept-unknown", "--listen", "127.0.0.1:0", "--ca-out", os.path.join(work, "ca.pem"), "--log-level", "info", *extra],
                            cwd=work, stdout=subprocess.PIPE, stderr=apns_log, text=True)
    return apns, apns.stdout.readline().split()[2], apns_log


def gateway_config(url, key_path, database, ca_path, max_in_flight=100, webhook=None):
    """A gateway configuration with one app, "bench", sending to the local APNs at url."""
    digest = subprocess.run(["sha256sum"], input=API_KEY, capture_output=True, text=True).stdout.split()[0]
    app = {"id": "bench", "topic": "com.example.bench",
           "apns": {"auth_key": key_path, "key_id": "BENCH00KEY", "team_id": "BENCHTEAM0",
                    "production_url": url, "sandbox_url": url, "ca_cert": ca_path},
           "api_keys": [{"id": "bench", "sha256": digest, "scopes": ["send", "devices", "read"]}],
           "max_in_flight": max_in_flight, "max_queue": 10_000_000, "rate_limit": 1_000_000}
    if webhook is not None:
        app["webhook"] = webhook
    return {"listen": "127.0.0.1:0", "admin_listen": "127.0.0.1:0", "public_url": "http://127.0.0.1:1", "database": database,
            "apps": [app]}


def write_config(directory, config, name="gateway.json"):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def register(gateway, users, record):
    """Devices d0… for users u0…, one each, with tokens 1, 2, …"""
    for u in range(users):
        status, _ = gateway.call("PUT", f"/v1/apps/bench/devices/d{u}", {
            "user_id": f"u{u}", "apns_token": f"{u + 1:064x}", "environment": "production", "key_record": record})
        assert status == 201, status


def apns_accepted(log_path):
    """How often the local APNs accepted each apns-id (from its log)."""
    seen = {}
    with open(log_path, errors="replace") as f:
        for line in f:
            m = re.search(r"apns-id=([0-9a-f-]{36})", line)
            if m and " accepted" in line:
                seen[m.group(1)] = seen.get(m.group(1), 0) + 1
    return seen


class Gateway:
    def __init__(self, server_bin, config, work):
        self.proc = subprocess.Popen([server_bin, "gateway", "--config", config, "--log-level", "warning"], cwd=work,
                                     stdout=subprocess.PIPE, stderr=open(os.path.join(work, "gateway.log"), "ab"), text=True)
        self.port = None
        self.admin = None
        while self.port is None or self.admin is None:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the gateway exited at start; see gateway.log")
            m = re.match(r"(api|admin) listening on .*:(\d+)$", line.strip())
            if m:
                if m.group(1) == "api":
                    self.port = int(m.group(2))
                else:
                    self.admin = int(m.group(2))

    def call(self, method, path, body=None, admin=False):
        conn = http.client.HTTPConnection("127.0.0.1", self.admin if admin else self.port, timeout=30)
        headers = {"Authorization": "Bearer " + API_KEY}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        payload = r.read()
        conn.close()
        return r.status, payload

    def metric(self, name, state=None):
        _, text = self.call("GET", "/metrics", admin=True)
        total = 0.0
        for line in text.decode().splitlines():
            if line.startswith(name + "{") and (state is None or f'state="{state}"' in line):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def wait_drained(self, accepted_target, timeout=600):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.metric("sealedpush_gateway_deliveries_total", "accepted") >= accepted_target:
                return time.time()
            time.sleep(0.05)
        raise RuntimeError(f"deliveries did not reach {accepted_target} accepted within {timeout} s")


def run_wrk(port, seconds, work, name, request_lua, connections):
    """wrk (2 threads) for `seconds` with a script of the bench's headers, `request_lua` and a `done` that prints
    one WRK line; requests, errors (wrk's, plus lines the script printed as BAD), p50, p99 ms, duration s."""
    script = os.path.join(work, name)
    with open(script, "w") as f:
        f.write(f"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {API_KEY}"
local n = 0
{request_lua}
{WRK_DONE_LUA}""")
    return run_wrk_script(port, seconds, script, connections)


# The `done` function every wrk script of the benches ends with: one WRK line that run_wrk_script reads.
WRK_DONE_LUA = """done = function(summary, latency, requests)
  io.write(string.format("WRK %d %d %d %d %d\\n", summary.requests, summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), summary.duration))
end
"""


def run_wrk_script(port, seconds, script, connections):
    """wrk (2 threads) for `seconds` with the Lua `script` (ending with WRK_DONE_LUA); requests, errors (wrk's, plus
    lines the script printed as BAD), p50, p99 ms, duration s."""
    out = subprocess.run(["wrk", "-t", "2", "-c", str(connections), "-d", f"{seconds}s", "--latency", "-s", script,
                          f"http://127.0.0.1:{port}"], capture_output=True, text=True, check=True).stdout
    bad = sum(1 for l in out.splitlines() if l.startswith("BAD "))
    line = [l for l in out.splitlines() if l.startswith("WRK ")][-1].split()
    requests, errors, p50, p99, duration = map(int, line[1:])
    return requests, errors + bad, p50 / 1000, p99 / 1000, duration / 1e6


def wrk(port, seconds, users, work, connections=32):
    """wrk posting one message per request, each to the next user; requests, errors, p50, p99 ms, duration s."""
    return run_wrk(port, seconds, work, "post.lua", f"""
request = function()
  n = n + 1
  local body = '{{"to":{{"user_id":"u' .. (n % {users}) .. '"}},"body":"bench message ' .. n .. '"}}'
  return wrk.format(nil, "/v1/apps/bench/messages", nil, body)
end
""", connections)


def wrk_batch(port, seconds, users, work, size=100, connections=8, prefix="u"):
    """wrk posting batches of `size` messages (gateway v1 §5.1), each to the next user (`prefix` + number); requests,
    errors (a batch answered other than 200, or with a 4xx/5xx result, counts as one), p50, p99 ms, duration s."""
    return run_wrk(port, seconds, work, f"batch-{prefix}.lua", f"""
request = function()
  local parts = {{}}
  for i = 1, {size} do
    n = n + 1
    parts[i] = '{{"to":{{"user_id":"{prefix}' .. (n % {users}) .. '"}},"body":"bench message ' .. n .. '"}}'
  end
  return wrk.format(nil, "/v1/apps/bench/messages/batch", nil, '{{"messages":[' .. table.concat(parts, ",") .. ']}}')
end
response = function(status, headers, body)
  if status ~= 200 or string.find(body, '"status":4') or string.find(body, '"status":5') then
    io.write("BAD " .. status .. "\\n")
  end
end
""", connections)


def wrk_mode(port, seconds, users, work, mode, connections=32):
    """wrk posting one message per request with "delivery": mode, each to the next user; requests, errors, p50, p99
    ms, duration s."""
    return run_wrk(port, seconds, work, f"post-{mode}.lua", f"""
request = function()
  n = n + 1
  local body = '{{"to":{{"user_id":"u' .. (n % {users}) .. '"}},"body":"bench message ' .. n .. '","delivery":"{mode}"}}'
  return wrk.format(nil, "/v1/apps/bench/messages", nil, body)
end
response = function(status, headers, body)
  if status ~= 202 then
    io.write("BAD " .. status .. "\\n")
  end
end
""", connections)


class CaptureTail(threading.Thread):
    """Follows `apns serve --capture`'s file: counts the pushes the local APNs accepted (and when the count last
    grew) and, with `handles`, puts each push's SEALEDPUSH_FETCH handle on that queue."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.count = 0
        self.last_at = 0.0
        self.handles = None
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def run(self):
        while not os.path.exists(self.path) and not self.stopping.is_set():
            time.sleep(0.01)
        with open(self.path, "rb") as f:
            rest = b""
            while not self.stopping.is_set():
                chunk = f.read(1 << 20)
                if not chunk:
                    time.sleep(0.002)
                    continue
                rest += chunk
                *lines, rest = rest.split(b"\n")
                now = time.time()
                for line in lines:
                    handles = self.handles
                    if handles is not None:
                        try:
                            handle = json.loads(json.loads(line)["payload"]).get("SEALEDPUSH_FETCH")
                        except (ValueError, KeyError):
                            handle = None
                        if handle:
                            handles.put(handle)
                with self.lock:
                    self.count += len(lines)
                    self.last_at = now

    def snapshot(self):
        with self.lock:
            return self.count, self.last_at

    def wait_for(self, target, timeout=600, quiet=0.5):
        """Once the count reached `target`, and then nothing more came for `quiet` s (a request wrk did not count,
        still in flight when it stopped, may still be pushed): the count and the time of the last push (raises after
        `timeout` s)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            count, at = self.snapshot()
            if count >= target and time.time() - at >= quiet:
                return count, at
            time.sleep(0.01)
        raise RuntimeError(f"the local APNs received {self.snapshot()[0]} pushes, not {target}, within {timeout} s")


class Fetcher(threading.Thread):
    """A phone's app fetching by handle: takes handles off `handles`, POSTs /v1/mailbox/fetch over one keep-alive
    connection and records each fetch's status, latency (s) and when it ended."""

    def __init__(self, port, handles, results):
        super().__init__(daemon=True)
        self.port = port
        self.handles = handles
        self.results = results

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        while True:
            handle = self.handles.get()
            if handle is None:
                break
            body = json.dumps({"handle": handle}).encode()
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/v1/mailbox/fetch", body=body, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                status = r.status
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                status = 0
            self.results.append((status, time.perf_counter() - t0, time.time()))
        conn.close()


def percentile(values, p):
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def mailbox_case(sp, server_bin, seconds, users, fetchers):
    """Item 4 of the docstring on a gateway and a local APNs of its own; the lines it prints."""
    usage = subprocess.run([server_bin, "apns", "serve", "--help"], capture_output=True, text=True).stdout
    if "--capture" not in usage:
        raise SystemExit(f"{server_bin} has no `apns serve --capture`, which the mailbox case reads handles from: "
                         "build sealedpush-server from this source (make release) and pass it as --server-bin")
    work = tempfile.mkdtemp(prefix="sealedpush-bench-mailbox-")
    key_path, record = make_keys(sp, server_bin, work)
    capture = os.path.join(work, "apns-capture.jsonl")
    apns, url, _ = start_apns(server_bin, work, key_path, log_name="apns-mailbox.log", extra=("--capture", capture))
    tail = CaptureTail(capture)
    tail.start()
    gateway = None
    workers = []
    handles = queue.Queue()
    try:
        config = gateway_config(url, key_path, "sqlite:gateway.db", os.path.join(work, "ca.pem"))
        config["apps"][0]["mailbox"] = {"enabled": True, "fetch_grace": 60, "max_message_bytes": 32768}
        gateway = Gateway(server_bin, write_config(work, config), work)
        register(gateway, users, record)

        # Push mode: the same wrk load, "delivery": "push"; to the local APNs.
        cpu0 = cpu_seconds(gateway.proc.pid)
        start = time.time()
        requests, errors, p50, p99, _ = wrk_mode(gateway.port, seconds, users, work, "push")
        push_posted, push_end = tail.wait_for(requests - errors)
        push_rate = push_posted / (push_end - start)
        push_cpu_us = (cpu_seconds(gateway.proc.pid) - cpu0) / max(1, push_posted) * 1e6

        # Mailbox mode: the same load, "delivery": "mailbox", while the phones fetch what the local APNs received.
        base = tail.snapshot()[0]
        tail.handles = handles
        results = []
        workers = [Fetcher(gateway.port, handles, results) for _ in range(fetchers)]
        for w in workers:
            w.start()
        cpu1 = cpu_seconds(gateway.proc.pid)
        start = time.time()
        m_requests, m_errors, m_p50, m_p99, _ = wrk_mode(gateway.port, seconds, users, work, "mailbox")
        pushed, mailbox_end = tail.wait_for(base + m_requests - m_errors)
        mailbox_posted = pushed - base
        deadline = time.time() + 300
        while len(results) < mailbox_posted and time.time() < deadline:
            time.sleep(0.01)
        mailbox_cpu = cpu_seconds(gateway.proc.pid) - cpu1
        mailbox_rate = mailbox_posted / (mailbox_end - start)
        fetched = [latency for status, latency, _ in results if status == 200]
        fetched_end = max((ended for _, _, ended in results), default=time.time())
        fetched_rate = len(fetched) / (fetched_end - start)
        statuses = {}
        for status, _, _ in results:
            statuses[status] = statuses.get(status, 0) + 1
        mailbox_cpu_us = mailbox_cpu / max(1, len(fetched)) * 1e6
    finally:
        for _ in workers:
            handles.put(None)
        for w in workers:
            w.join(timeout=30)
        tail.stopping.set()
        if gateway:
            gateway.proc.send_signal(signal.SIGTERM)
            gateway.proc.wait()
        apns.send_signal(signal.SIGTERM)
        apns.wait()

    ratio = mailbox_rate / push_rate if push_rate else 0
    f50, f99 = percentile(fetched, 50) * 1000, percentile(fetched, 99) * 1000
    others = ", ".join(f"{n} answered {s or 'no answer'}" for s, n in sorted(statuses.items()) if s != 200) or "none other than 200"
    return [
        f"\nMailbox mode on SQLite (wrk -c 32 for {seconds} s per mode, {users} users of one device each; {fetchers} fetching threads; "
        "wrk, the fetches, the gateway and the local APNs share this machine)",
        f"  push mode, post to APNs      {push_rate:10.0f} deliveries/s   ({push_posted} messages; POST p99 {p99:.1f} ms)",
        f"  mailbox mode, post to APNs   {mailbox_rate:10.0f} deliveries/s   ({mailbox_posted} messages; POST p99 {m_p99:.1f} ms; fetched while it ran)",
        f"  mailbox / push mode          {ratio:10.2f}x   target >= 0.8x: {verdict(ratio >= 0.8)}",
        f"  post to fetched              {fetched_rate:10.0f} messages/s   ({len(fetched)} fetched with 200; {others})",
        f"  POST /v1/mailbox/fetch       p50 {f50:.1f} ms, p99 {f99:.1f} ms under that load   target p99 <= 50 ms: {verdict(len(fetched) > 0 and f99 <= 50)}",
        f"  gateway CPU                  {mailbox_cpu_us:.0f} µs per fetched message (post, seal, SQLite, push, fetch), "
        f"against {push_cpu_us:.0f} µs per push-mode message",
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--server-bin", required=True)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--total", type=int, default=100_000)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--kill-messages", type=int, default=2000)
    ap.add_argument("--only", choices=["all", "mailbox"], default="all",
                    help="mailbox: only the mailbox case (4.), on a gateway of its own")
    ap.add_argument("--fetchers", type=int, default=4, help="threads fetching by handle in the mailbox case")
    args = ap.parse_args()
    sp, server_bin = os.path.abspath(args.bin), os.path.abspath(args.server_bin)
    if args.only == "mailbox":
        for line in mailbox_case(sp, server_bin, args.seconds, args.users, args.fetchers):
            print(line)
        return 0
    work = tempfile.mkdtemp(prefix="sealedpush-bench-gateway-")
    key_path, record = make_keys(sp, server_bin, work)
    apns, url, apns_log = start_apns(server_bin, work, key_path)
    gateway = None
    try:
        config_path = write_config(work, gateway_config(url, key_path, "sqlite:gateway.db", os.path.join(work, "ca.pem")))
        gateway = Gateway(server_bin, config_path, work)
        register(gateway, args.users, record)

        # 1. Throughput and latency.
        cpu0 = (cpu_seconds(gateway.proc.pid), cpu_seconds(apns.pid))
        start = time.time()
        requests, errors, p50, p99, duration = wrk(gateway.port, args.seconds, args.users, work)
        posted = requests - errors
        end = gateway.wait_drained(posted)
        gateway_cpu_us = (cpu_seconds(gateway.proc.pid) - cpu0[0]) / max(1, posted) * 1e6
        apns_cpu_us = (cpu_seconds(apns.pid) - cpu0[1]) / max(1, posted) * 1e6
        gateway_rate = posted / (end - start)
        rss_samples = [(posted, rss_kib(gateway.proc.pid))]

        batch = os.path.join(work, "batch.jsonl")
        with open(batch, "w") as f:
            for i in range(posted):
                f.write(json.dumps({"to": record, "body": f"bench message {i}", "device_token": f"{(i % args.users) + 1:064x}"}) + "\n")
        send = [sp, "send", "--auth-key", key_path, "--team-id", "BENCHTEAM0", "--topic", "com.example.bench", "--environment", url,
                "--ca-cert", os.path.join(work, "ca.pem"), "--concurrency", "100", "--batch", batch]
        t0 = time.time()
        sent = subprocess.run(send, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        send_rate = posted / (time.time() - t0) if sent.returncode == 0 else 0.0

        # 1b. Batches of 100 (gateway v1 §5.1): deliveries accepted by APNs per second from the first request to the last
        # acceptance, against the same send --batch rate.
        accepted0 = gateway.metric("sealedpush_gateway_deliveries_total", "accepted")
        cpu1 = cpu_seconds(gateway.proc.pid)
        start = time.time()
        b_requests, b_errors, b_p50, b_p99, _ = wrk_batch(gateway.port, args.seconds, args.users, work)
        batch_messages = (b_requests - b_errors) * 100
        end = gateway.wait_drained(accepted0 + batch_messages)
        batch_rate = batch_messages / (end - start)
        batch_cpu_us = (cpu_seconds(gateway.proc.pid) - cpu1) / max(1, batch_messages) * 1e6
        posted_total = posted + batch_messages

        # 2. Memory over a long run.
        total = posted_total
        rss_samples.append((total, rss_kib(gateway.proc.pid)))
        while total < args.total:
            r, e, _, _, _ = wrk(gateway.port, 5, args.users, work)
            total += r - e
            gateway.wait_drained(total)
            rss_samples.append((total, rss_kib(gateway.proc.pid)))
        quarter = next((kib for n, kib in rss_samples if n >= args.total // 4), rss_samples[0][1])
        last = rss_samples[-1][1]
        flat = last <= quarter * 1.25 + 8192

        # 3. kill -9 in the middle of a run.
        ids = []
        stop_at = args.kill_messages // 2

        def post_all():
            for i in range(args.kill_messages):
                try:
                    status, body = gateway.call("POST", "/v1/apps/bench/messages",
                                                {"to": {"user_id": f"u{i % args.users}"}, "body": f"kill run {i}"})
                except OSError:
                    return
                if status == 202:
                    ids.append(json.loads(body)["message_id"])

        poster = threading.Thread(target=post_all)
        poster.start()
        while len(ids) < stop_at:
            time.sleep(0.001)
        gateway.proc.send_signal(signal.SIGKILL)
        gateway.proc.wait()
        poster.join()
        answered = list(ids)
        gateway = Gateway(server_bin, config_path, work)
        deadline = time.time() + 300
        apns_ids = {}
        pending = list(answered)
        while pending and time.time() < deadline:
            still = []
            for mid in pending:
                _, body = gateway.call("GET", f"/v1/apps/bench/messages/{mid}")
                d = json.loads(body)["deliveries"][0]
                if d["state"] == "accepted":
                    apns_ids[mid] = d["apns_id"]
                else:
                    still.append(mid)
            pending = still
            if pending:
                time.sleep(0.2)
        apns_log.flush()
        seen = apns_accepted(os.path.join(work, "apns.log"))
        reached = sum(1 for a in apns_ids.values() if seen.get(a, 0) >= 1)
        twice = sum(1 for a in apns_ids.values() if seen.get(a, 0) >= 2)
    finally:
        if gateway:
            gateway.proc.send_signal(signal.SIGTERM)
            gateway.proc.wait()
        apns.send_signal(signal.SIGTERM)
        apns.wait()

    ratio = gateway_rate / send_rate if send_rate else 0
    batch_ratio = batch_rate / send_rate if send_rate else 0
    print(f"\nGateway on SQLite ({posted} messages in {args.seconds} s from wrk -c 32, one device each; wrk, gateway and local APNs share this machine)")
    print(f"  gateway, post to accepted    {gateway_rate:10.0f} deliveries/s")
    print(f"  sealedpush send --batch      {send_rate:10.0f} pushes/s   (same {posted} pushes, same local APNs)")
    print(f"  gateway / send --batch       {ratio:10.2f}x   target >= 0.3x: {verdict(ratio >= 0.3)}")
    print(f"  CPU per message              gateway {gateway_cpu_us:.0f} µs (HTTP in, seal, SQLite, APNs out), local APNs {apns_cpu_us:.0f} µs")
    print(f"  POST /messages latency       p50 {p50:.1f} ms, p99 {p99:.1f} ms   target p99 <= 50 ms: {verdict(p99 <= 50)}")
    print(f"  batches of 100, to accepted  {batch_rate:10.0f} deliveries/s   ({batch_messages} messages in {b_requests - b_errors} batches, wrk -c 8; {b_errors} refused)")
    print(f"  batches / send --batch       {batch_ratio:10.2f}x   target >= 0.6x: {verdict(batch_ratio >= 0.6)}")
    print(f"  CPU per message in batches   gateway {batch_cpu_us:.0f} µs")
    print(f"  POST …/messages/batch        p50 {b_p50:.1f} ms, p99 {b_p99:.1f} ms   target p99 <= 250 ms: {verdict(b_p99 <= 250)}")
    print(f"  resident memory              " + ", ".join(f"{kib / 1024:.1f} MiB at {n}" for n, kib in rss_samples)
          + f"   flat over {rss_samples[-1][0]} messages: {verdict(flat)}")
    print(f"  kill -9 mid-run              {len(answered)} answered 202 before the kill; {reached} of them reached APNs after restart "
          f"({verdict(reached == len(answered))}); {twice} went twice (same apns-id and collapse id)")
    for line in mailbox_case(sp, server_bin, args.seconds, args.users, args.fetchers):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
