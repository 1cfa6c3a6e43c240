#!/usr/bin/env python3
"""The gateway on PostgreSQL (issue #21), against a throwaway PostgreSQL cluster this script starts and removes:

1. Deliveries per second end to end (wrk POSTs /v1/apps/bench/messages as bench_gateway.py does, one device per
   user, to `sealedpush-server apns serve --accept-unknown`): one gateway on SQLite, one on PostgreSQL, and two
   on one PostgreSQL database (wrk's connections split between them), in the same run. From wrk's first request
   to the last delivery accepted; with each process's CPU time over that window, which says what bounds it.
2. kill -9 of one of two instances on PostgreSQL under wrk, against a local APNs that answers after 100 ms (so
   that attempts are in flight): the deliveries it had leased (in flight) at the kill, how long until the other
   sent them (bounded by the lease, 60 s), and how many pushes went twice at the local APNs (same apns-id) --
   never more than it had in flight.
3. Webhook events (gateway v1 section 8) from one instance on PostgreSQL to a receiver in this script that
   verifies each signature: events per second, and the delay from the state change (the event's created_at,
   which is the delivery's accepted_at) to the receiver, p50 and p99, at a light paced load and under wrk.

4. Webhook throughput (issue #47): events written while the app had no webhook, then POSTed by an instance
   started with one (its still-pending events, gateway docs "Webhooks"): events per second to one receiver.
5. The time from a message's intake (its created_at: the 202 follows the commit) to the local APNs accepting it
   (accepted_at), at a paced 20 messages/s, p50 and p99.

Each of issue #47's targets is printed met or not. PostgreSQL's statements are counted with pg_stat_statements
(loaded by this cluster): statements and round trips per delivered message, and the busiest statements.

PostgreSQL keeps its defaults (fsync on; the SQLite store uses synchronous=FULL). Everything shares this
machine's cores: wrk, the gateways, PostgreSQL and the local APNs.
"""

import argparse
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gateway import (Gateway, apns_accepted, cpu_seconds, gateway_config, make_keys, register,  # noqa: E402
                           start_apns, verdict, wrk, wrk_batch, write_config)

WEBHOOK_SECRET = "bench-webhook-secret-" + "0123456789abcdef0123456789abcdef"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def machine_busy_seconds():
    """CPU seconds every core of the machine spent busy so far (from /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class Cluster:
    """A throwaway PostgreSQL cluster, as the Swift tests start one (PostgresCluster.swift): initdb as the
    `postgres` user into a directory under /tmp, a server on a free loopback port with trust authentication."""

    def __init__(self):
        root = "/usr/lib/postgresql"
        versions = sorted((int(v) for v in os.listdir(root) if v.isdigit()), reverse=True) if os.path.isdir(root) else []
        candidates = [f"{root}/15/bin"] + [f"{root}/{v}/bin" for v in versions]
        self.bin = next((d for d in candidates if os.access(f"{d}/initdb", os.X_OK) and os.access(f"{d}/pg_ctl", os.X_OK)), None)
        if self.bin is None:
            raise RuntimeError(f"PostgreSQL's server binaries are not in {root}/N/bin: apt-get install postgresql")
        self.directory = tempfile.mkdtemp(prefix="sealedpush-bench-pg-", dir="/tmp")
        self.data = os.path.join(self.directory, "data")
        self.port = free_port()
        self.started = False
        shutil.chown(self.directory, "postgres", "postgres")
        os.chmod(self.directory, 0o700)
        self.as_postgres([f"{self.bin}/initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C"])
        self.as_postgres([f"{self.bin}/pg_ctl", "-D", self.data, "-l", os.path.join(self.directory, "server.log"), "-w", "-t", "60", "-o",
                          f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.directory} -c max_connections=200 "
                          "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all", "start"])
        self.started = True
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            self.pid = int(f.readline())

    def as_postgres(self, arguments, capture=False):
        r = subprocess.run(["runuser", "-u", "postgres", "--"] + arguments, cwd=self.directory, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(arguments)} exited {r.returncode}: {r.stderr[-2000:]}")
        return r.stdout

    def create(self, name):
        self.as_postgres([f"{self.bin}/createdb", "-h", self.directory, "-p", str(self.port), "-U", "postgres", name])
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}?sslmode=disable"

    def query(self, database, sql):
        """Rows of sql as lists of strings."""
        out = self.as_postgres([f"{self.bin}/psql", "-h", self.directory, "-p", str(self.port), "-U", "postgres", "-d", database,
                                "-At", "-F", "\t", "-c", sql])
        return [line.split("\t") for line in out.splitlines() if line]

    def statements_reset(self, database):
        """Starts pg_stat_statements' counts afresh (every database's)."""
        self.query(database, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        self.query(database, "SELECT pg_stat_statements_reset()")

    def statements(self, database, top=6):
        """(every statement's calls, [(calls, total ms, the statement's first 90 characters)] of the busiest) in
        `database` since `statements_reset`."""
        where = f"dbid = (SELECT oid FROM pg_database WHERE datname = '{database}')"
        total = self.query(database, f"SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE {where}")[0][0]
        rows = self.query(database, f"SELECT calls, round(total_exec_time::numeric, 1), "
                                    f"regexp_replace(left(query, 90), '\s+', ' ', 'g') FROM pg_stat_statements "
                                    f"WHERE {where} ORDER BY calls DESC LIMIT {top}")
        return int(total), [(int(c), float(t), q) for c, t, q in rows]

    def cpu(self):
        """CPU seconds of the server and its backends so far (ended backends no longer count; the gateways' pools
        keep theirs open)."""
        total = cpu_seconds(self.pid)
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == self.pid:
                            total += cpu_seconds(int(entry))
                except (OSError, ValueError, IndexError):
                    pass
        return total

    def stop(self):
        if self.started:
            subprocess.run(["runuser", "-u", "postgres", "--", f"{self.bin}/pg_ctl", "-D", self.data, "-m", "immediate", "-w", "-t", "30", "stop"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.directory, ignore_errors=True)


class Run:
    """What every scenario shares: the binaries, the keys, one local APNs, the cluster."""

    def __init__(self, args, work, cluster):
        self.args = args
        self.work = work
        self.cluster = cluster
        self.sp, self.server_bin = os.path.abspath(args.bin), os.path.abspath(args.server_bin)
        self.key_path, self.record = make_keys(self.sp, self.server_bin, work)
        self.apns, self.apns_url, self.apns_log = start_apns(self.server_bin, work, self.key_path)
        self.gateways = []

    def directory(self, name):
        path = os.path.join(self.work, name)
        os.makedirs(path, exist_ok=True)
        return path

    def start(self, config_path, name):
        d = self.directory(name)
        try:
            g = Gateway(self.server_bin, config_path, d)
        except RuntimeError:
            with open(os.path.join(d, "gateway.log"), errors="replace") as f:
                raise RuntimeError(f"the gateway ({name}) exited at start: {f.read()[-2000:]}")
        self.gateways.append(g)
        return g

    def stop(self, g):
        if g.proc.poll() is None:
            g.proc.send_signal(signal.SIGTERM)
            g.proc.wait()

    def stop_all(self):
        for g in self.gateways:
            self.stop(g)
        self.apns.send_signal(signal.SIGTERM)
        self.apns.wait()


def accepted_total(gateways):
    return sum(g.metric("sealedpush_gateway_deliveries_total", "accepted") for g in gateways if g.proc.poll() is None)


def messages_total(gateways):
    """Messages the gateways took so far (a moment after the load stopped, so that requests it cut off are in)."""
    time.sleep(0.5)
    return sum(g.metric("sealedpush_gateway_messages_total") for g in gateways if g.proc.poll() is None)


def wait_accepted(gateways, target, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if accepted_total(gateways) >= target:
            return time.time()
        time.sleep(0.05)
    raise RuntimeError(f"deliveries did not reach {target} accepted within {timeout} s")


def wrk_split(gateways, seconds, users, directories, connections=32, batch=False):
    """wrk against each gateway at once, the connections split between them (single messages, or with `batch`
    batches of 100 over 8 connections); (answered, errors, p99 ms)."""
    results = [None] * len(gateways)

    def one(i):
        try:
            if batch:
                results[i] = wrk_batch(gateways[i].port, seconds, users, directories[i], connections=max(1, 8 // len(gateways)))
            else:
                results[i] = wrk(gateways[i].port, seconds, users, directories[i], connections=connections // len(gateways))
        except subprocess.CalledProcessError:
            results[i] = (0, 0, 0.0, 0.0, 0.0)  # its gateway was killed
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(gateways))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(r[0] for r in results), sum(r[1] for r in results), max(r[3] for r in results)


def throughput(run, label, database, instances, batch=False):
    """Deliveries per second with `instances` gateways on `database` (single POSTs, or batches of 100 with `batch`);
    a dict of the figures."""
    d = run.directory(label)
    config = write_config(d, gateway_config(run.apns_url, run.key_path, database, os.path.join(run.work, "ca.pem")))
    gateways = [run.start(config, f"{label}-{i}") for i in range(instances)]
    register(gateways[0], run.args.users, run.record)
    time.sleep(1)  # PostgreSQL: every instance has heartbeated and counts the others before the load starts
    name = database.rsplit("/", 1)[1].split("?")[0] if database.startswith("postgres") else None
    if name:
        run.cluster.statements_reset(name)
    cpu0 = {"gateways": sum(cpu_seconds(g.proc.pid) for g in gateways), "apns": cpu_seconds(run.apns.pid),
            "postgres": run.cluster.cpu(), "machine": machine_busy_seconds()}
    children0 = os.times()
    start = time.time()
    requests, errors, p99 = wrk_split(gateways, run.args.seconds, run.args.users, [run.directory(f"{label}-{i}") for i in range(instances)],
                                      batch=batch)
    posted = int(messages_total(gateways))  # also those whose answer wrk did not wait for at its end
    end = wait_accepted(gateways, posted)
    children1 = os.times()
    elapsed = end - start
    cpu = {"gateways": sum(cpu_seconds(g.proc.pid) for g in gateways) - cpu0["gateways"], "apns": cpu_seconds(run.apns.pid) - cpu0["apns"],
           "postgres": run.cluster.cpu() - cpu0["postgres"] if database.startswith("postgres") else 0.0,
           "wrk": (children1.children_user + children1.children_system) - (children0.children_user + children0.children_system),
           "machine": machine_busy_seconds() - cpu0["machine"]}
    statements = run.cluster.statements(name) if name else None
    for g in gateways:
        run.stop(g)
    return {"label": label, "posted": posted, "errors": errors, "rate": posted / elapsed, "elapsed": elapsed, "p99": p99, "cpu": cpu,
            "batch": batch, "statements": statements}


def kill_takeover(run):
    """Two instances on one database under wrk; one is killed with SIGKILL mid-run."""
    database = "killrun"
    url = run.cluster.create(database)
    d = run.directory("kill")
    # A local APNs that answers after --kill-apns-latency (an APNs round trip from a server), so that the victim
    # has attempts in flight when it is killed.
    apns, apns_url, apns_log = start_apns(run.server_bin, d, run.key_path, extra=("--latency", f"{run.args.kill_apns_latency}ms"))
    config = write_config(d, gateway_config(apns_url, run.key_path, url, os.path.join(d, "ca.pem")))
    victim, survivor = run.start(config, "kill-victim"), run.start(config, "kill-survivor")
    register(survivor, run.args.users, run.record)
    time.sleep(1)
    rows = run.cluster.query(database, f"SELECT instance_id FROM instances WHERE name LIKE '%:{victim.proc.pid} %'")
    victim_id = rows[0][0]
    load = threading.Thread(target=wrk_split, args=([victim, survivor], run.args.kill_seconds, run.args.users,
                                                   [run.directory("kill-victim"), run.directory("kill-survivor")]))
    load.start()
    time.sleep(run.args.kill_seconds / 2)
    victim.proc.send_signal(signal.SIGKILL)
    killed_at = time.time()
    victim.proc.wait()
    leased = [r[0] for r in run.cluster.query(database, f"SELECT delivery_id FROM deliveries WHERE leased_by = '{victim_id}' AND state = 'queued'")]
    load.join()
    ids = ",".join(f"'{x}'" for x in leased) or "''"
    deadline = time.time() + 300
    while time.time() < deadline:
        left = int(run.cluster.query(database, "SELECT count(*) FROM deliveries WHERE state = 'queued'")[0][0])
        if left == 0:
            break
        time.sleep(0.2)
    else:
        raise RuntimeError("deliveries still queued 300 s after the kill")
    first, last = (int(x) if x else None for x in run.cluster.query(
        database, f"SELECT min(accepted_at), max(accepted_at) FROM deliveries WHERE delivery_id IN ({ids})")[0])
    states = run.cluster.query(database, "SELECT state, count(*) FROM deliveries GROUP BY state")
    apns_ids = [r[0] for r in run.cluster.query(database, "SELECT apns_id FROM deliveries")]
    run.stop(survivor)
    apns.send_signal(signal.SIGTERM)
    apns.wait()
    apns_log.close()
    seen = apns_accepted(os.path.join(d, "apns.log"))
    twice = sum(1 for a in apns_ids if seen.get(a, 0) >= 2)
    thrice = sum(1 for a in apns_ids if seen.get(a, 0) >= 3)
    missing = sum(1 for a in apns_ids if seen.get(a, 0) == 0)
    return {"deliveries": len(apns_ids), "states": dict((s, int(n)) for s, n in states), "leased": len(leased),
            "first": (first / 1000 - killed_at) if first else None, "last": (last / 1000 - killed_at) if last else None,
            "twice": twice, "thrice": thrice, "missing": missing}


class Receiver:
    """Takes webhook POSTs (HTTP/1.1, kept alive), verifies each signature (gateway v1 section 8) and records when
    it arrived: asyncio in a thread of its own, so that the receiver is not what bounds the events per second
    (http.server's thread per connection contends for the interpreter lock)."""

    def __init__(self, secret):
        import asyncio
        self.secret = secret
        self.lock = threading.Lock()
        self.events = {}      # event id -> (arrival, body)
        self.repeats = 0
        self.refused = 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _run(self, ready):
        import asyncio
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._connection, "127.0.0.1", 0))
        self.server_address = self.server.sockets[0].getsockname()
        ready.set()
        self.loop.run_forever()

    async def _connection(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                headers = {}
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                arrived = time.time()
                fields = dict(p.split("=", 1) for p in headers.get("sealedpush-signature", "").split(",") if "=" in p)
                t, v1 = fields.get("t", ""), fields.get("v1", "")
                expected = hmac.new(self.secret, t.encode() + b"." + body, hashlib.sha256).hexdigest()
                ok = t.isdigit() and abs(time.time() - int(t)) <= 300 and hmac.compare_digest(expected, v1)
                with self.lock:
                    if not ok:
                        self.refused += 1
                    else:
                        event = json.loads(body)
                        if event["id"] in self.events:
                            self.repeats += 1
                        else:
                            self.events[event["id"]] = (arrived, event)
                writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n" if ok else
                             b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except Exception:  # the gateway closed the connection (or sent what this receiver does not parse)
            pass
        finally:
            writer.close()

    def serve_forever(self):
        """Nothing to do: the receiver serves from its own thread since it was made."""

    def shutdown(self):
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def parse_ms(text):
    """An RFC 3339 UTC time with milliseconds ("2026-11-25T21:30:00.123Z") to Unix seconds."""
    from datetime import datetime, timezone
    return datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z" if "." in text else "%Y-%m-%dT%H:%M:%S%z") \
        .astimezone(timezone.utc).timestamp()


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))] if values else float("nan")


def webhooks(run):
    """One instance on PostgreSQL with a webhook: a paced phase, then wrk."""
    url = run.cluster.create("webhooks")
    d = run.directory("webhooks")
    secret_path = os.path.join(d, "webhook.secret")
    with open(secret_path, "w") as f:
        f.write(WEBHOOK_SECRET + "\n")
    os.chmod(secret_path, 0o600)
    receiver = Receiver(WEBHOOK_SECRET.encode())
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    webhook = {"url": f"http://127.0.0.1:{receiver.server_address[1]}/events", "secret_file": secret_path}
    config = write_config(d, gateway_config(run.apns_url, run.key_path, url, os.path.join(run.work, "ca.pem"), webhook=webhook))
    g = run.start(config, "webhooks-0")
    register(g, run.args.users, run.record)
    results = []
    try:
        # Paced: a message every 1/rate s from one client, each to one device.
        seen_before = 0
        start = time.time()
        n = run.args.paced_rate * run.args.paced_seconds
        for i in range(n):
            target = start + i / run.args.paced_rate
            if target > time.time():
                time.sleep(target - time.time())
            status, _ = g.call("POST", "/v1/apps/bench/messages", {"to": {"user_id": f"u{i % run.args.users}"}, "body": f"paced {i}"})
            assert status == 202, status
        results.append(collect(receiver, seen_before, n, start, f"paced, {run.args.paced_rate} messages/s for {run.args.paced_seconds} s"))
        # Intake to APNs accepting, from the gateway's own clock: created_at is read before the commit that the 202
        # follows, so this is an upper bound of 202 → accepted.
        latency = [int(x[0]) for x in run.cluster.query("webhooks", "SELECT accepted_at - created_at FROM deliveries "
                                                                    "WHERE accepted_at IS NOT NULL ORDER BY created_at")][:n]
        # Under wrk.
        seen_before = len(receiver.events)
        start = time.time()
        wrk(g.port, run.args.webhook_seconds, run.args.users, run.directory("webhooks-0"))
        posted = int(messages_total([g])) - n
        results.append(collect(receiver, seen_before, posted, start, f"wrk -c 32 for {run.args.webhook_seconds} s ({posted} messages)"))
    finally:
        run.stop(g)
        receiver.shutdown()
    return results, receiver.repeats, receiver.refused, latency


def webhook_drain(run):
    """Events written while the app had no webhook (batches of 100 through one instance on PostgreSQL), then POSTed
    by an instance started with one: events per second to one receiver, from its first POST to its last."""
    url = run.cluster.create("drain")
    d = run.directory("drain")
    secret_path = os.path.join(d, "webhook.secret")
    with open(secret_path, "w") as f:
        f.write(WEBHOOK_SECRET + "\n")
    os.chmod(secret_path, 0o600)
    plain = write_config(d, gateway_config(run.apns_url, run.key_path, url, os.path.join(run.work, "ca.pem")), name="plain.json")
    g = run.start(plain, "drain-0")
    register(g, run.args.users, run.record)
    try:
        sent = 0
        while sent < run.args.drain_events:
            messages = [{"to": {"user_id": f"u{(sent + i) % run.args.users}"}, "body": f"drain {sent + i}"} for i in range(100)]
            status, _ = g.call("POST", "/v1/apps/bench/messages/batch", {"messages": messages})
            assert status == 200, status
            sent += 100
        wait_accepted([g], sent)
    finally:
        run.stop(g)
    pending = int(run.cluster.query("drain", "SELECT count(*) FROM events WHERE app = 'bench'")[0][0])
    receiver = Receiver(WEBHOOK_SECRET.encode())
    webhook = {"url": f"http://127.0.0.1:{receiver.server_address[1]}/events", "secret_file": secret_path}
    hooked = write_config(d, gateway_config(run.apns_url, run.key_path, url, os.path.join(run.work, "ca.pem"), webhook=webhook), name="hooked.json")
    run.cluster.statements_reset("drain")
    cpu_pg = run.cluster.cpu()
    g = run.start(hooked, "drain-1")
    cpu_g = cpu_seconds(g.proc.pid)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and len(receiver.events) < pending:
            time.sleep(0.05)
        cpu_g = cpu_seconds(g.proc.pid) - cpu_g
        cpu_pg = run.cluster.cpu() - cpu_pg
    finally:
        run.stop(g)
        receiver.shutdown()
    statements = run.cluster.statements("drain", top=5)
    arrivals = sorted(a for a, _ in receiver.events.values())
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else float("nan")
    return {"pending": pending, "received": len(arrivals), "rate": (len(arrivals) - 1) / span if len(arrivals) > 1 else 0.0,
            "span": span, "repeats": receiver.repeats, "refused": receiver.refused, "cpu_gateway": cpu_g, "cpu_pg": cpu_pg,
            "statements": statements}


def collect(receiver, seen_before, expected, start, label):
    """Waits for `expected` delivery.accepted events beyond the first `seen_before`; their rate and delays."""
    deadline = time.time() + 300
    while time.time() < deadline:
        with receiver.lock:
            accepted = [e for e in list(receiver.events.values())[seen_before:] if e[1]["type"] == "delivery.accepted"]
        if len(accepted) >= expected:
            break
        time.sleep(0.1)
    delays, mismatched = [], 0
    for arrived, event in accepted:
        created = parse_ms(event["created_at"])
        delivery = event["data"].get("delivery", {})
        if delivery.get("accepted_at") != event["created_at"]:
            mismatched += 1
        delays.append((arrived - created) * 1000)
    arrivals = [a for a, _ in accepted]
    span = (max(arrivals) - start) if arrivals else float("nan")
    return {"label": label, "events": len(accepted), "expected": expected, "rate": len(accepted) / span if arrivals else 0,
            "p50": percentile(delays, 50), "p99": percentile(delays, 99), "max": max(delays) if delays else float("nan"),
            "mismatched": mismatched}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--server-bin", required=True)
    ap.add_argument("--seconds", type=int, default=10, help="wrk's run per throughput case")
    ap.add_argument("--users", type=int, default=500)
    ap.add_argument("--kill-seconds", type=int, default=8, help="wrk's run in the kill case; the kill is half way")
    ap.add_argument("--kill-apns-latency", type=int, default=100, help="ms the kill case's local APNs takes to answer")
    ap.add_argument("--paced-rate", type=int, default=20)
    ap.add_argument("--paced-seconds", type=int, default=10)
    ap.add_argument("--webhook-seconds", type=int, default=5)
    ap.add_argument("--only", choices=["all", "webhooks"], default="all", help="webhooks: only the webhook cases and the paced latency")
    ap.add_argument("--drain-events", type=int, default=20_000, help="deliveries whose events the webhook drain POSTs")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_gateway_pg.py runs as root: it starts PostgreSQL as the postgres user (runuser)", file=sys.stderr)
        return 1
    work = tempfile.mkdtemp(prefix="sealedpush-bench-gateway-pg-")
    os.chmod(work, 0o755)
    cluster = None
    run = None
    try:
        cluster = Cluster()
        run = Run(args, work, cluster)
        if args.only == "webhooks":
            hooks, repeats, refused, latency = webhooks(run)
            drain = webhook_drain(run)
            for h in hooks:
                print(f"  webhooks, {h['label']}: {h['events']} of {h['expected']} events, {h['rate']:.0f} events/s; delay p50 {h['p50']:.0f} ms, "
                      f"p99 {h['p99']:.0f} ms, max {h['max']:.0f} ms")
            print(f"  webhooks, drain of {drain['pending']} events: {drain['received']} received, {drain['rate']:.0f} events/s "
                  f"({drain['span']:.1f} s); gateway CPU {drain['cpu_gateway']:.1f} s, PostgreSQL {drain['cpu_pg']:.1f} s; {refused + drain['refused']} refused")
            for calls, ms, query in drain["statements"][1]:
                print(f"    {calls:7d} × {ms:8.0f} ms  {query}")
            print(f"  intake to APNs accepting at {args.paced_rate}/s: p50 {percentile(latency, 50):.0f} ms, p99 {percentile(latency, 99):.0f} ms")
            print(f"  webhooks >= 1500 events/s: {verdict(drain['rate'] >= 1500)}; p99 delay <= 1 s under wrk: {verdict(hooks[-1]['p99'] <= 1000)}")
            return 0
        cases = [throughput(run, "sqlite", "sqlite:" + os.path.join(run.directory("sqlite"), "gateway.db"), 1),
                 throughput(run, "pg1", cluster.create("one"), 1),
                 throughput(run, "pg2", cluster.create("two"), 2),
                 throughput(run, "sqlite-b", "sqlite:" + os.path.join(run.directory("sqlite-b"), "gateway.db"), 1, batch=True),
                 throughput(run, "pg1-b", cluster.create("oneb"), 1, batch=True),
                 throughput(run, "pg2-b", cluster.create("twob"), 2, batch=True)]
        kill = kill_takeover(run)
        hooks, repeats, refused, latency = webhooks(run)
        drain = webhook_drain(run)
    finally:
        if run:
            run.stop_all()
        if cluster:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)

    names = {"sqlite": "1 instance, SQLite", "pg1": "1 instance, PostgreSQL", "pg2": "2 instances, one PostgreSQL",
             "sqlite-b": "batches: 1 instance, SQLite", "pg1-b": "batches: 1 instance, PostgreSQL", "pg2-b": "batches: 2 instances, one PG"}
    print(f"\nGateway on PostgreSQL {os.path.basename(os.path.dirname(cluster.bin))} (throwaway cluster, defaults: fsync on) against SQLite "
          f"(synchronous=FULL); wrk -c 32 for {args.seconds} s, {args.users} users of one device each; wrk, gateways, PostgreSQL and local APNs "
          f"share this machine's {os.cpu_count()} cores")
    for c in cases:
        base = cases[3 if c["batch"] else 0]["rate"]
        if c["label"] == "sqlite-b":
            print(f"  then batches of 100 messages (gateway v1 §5.1), wrk -c 8 (split between instances) for {args.seconds} s:")
        cpu = c["cpu"]
        window = c["elapsed"] * os.cpu_count()
        print(f"  {names[c['label']]:30s} {c['rate']:6.0f} deliveries/s  ({c['rate'] / base:4.2f}x SQLite; {c['posted']} messages, "
              f"{'batch' if c['batch'] else 'POST'} p99 {c['p99']:.0f} ms, {c['errors']} wrk errors; "
              f"{cpu['gateways'] / max(1, c['posted']) * 1e6:.0f} µs gateway CPU per message)")
        print(f"  {'':30s} CPU over the {c['elapsed']:.1f} s: gateway(s) {cpu['gateways']:.1f} s, PostgreSQL {cpu['postgres']:.1f} s, "
              f"local APNs {cpu['apns']:.1f} s, wrk {cpu['wrk']:.1f} s; the machine busy {cpu['machine']:.1f} of {window:.1f} core-seconds "
              f"({min(1.0, cpu['machine'] / window):.0%}; {max(0.0, cpu['machine'] - cpu['gateways'] - cpu['postgres'] - cpu['apns'] - cpu['wrk']):.1f} s other processes)")
    bound = kill["leased"]
    print(f"  kill -9 of one of two instances under wrk -c 32 (local APNs answering after {args.kill_apns_latency} ms; max_in_flight 100, "
          f"50 per instance): {kill['leased']} deliveries leased (in flight) by it at the kill; "
          + (f"the other sent the first of them {kill['first']:.1f} s and the last {kill['last']:.1f} s after the kill (lease 60 s)"
             if kill["first"] is not None else "none to take over"))
    print(f"  {'':30s} {kill['twice']} of {kill['deliveries']} deliveries went twice (same apns-id at the local APNs), {kill['thrice']} three times; "
          f"at most the {bound} it had in flight: {verdict(kill['twice'] <= bound and kill['thrice'] == 0)}; "
          f"states {kill['states']}, {kill['missing']} never reached APNs: {verdict(kill['missing'] == 0)}")
    for c in cases:
        if c["statements"]:
            total, top = c["statements"]
            print(f"  {names[c['label']]:30s} pg_stat_statements: {total} statements, {total / max(1, c['posted']):.2f} per delivered message "
                  f"(BEGIN and COMMIT included, and the idle loops' polls); the most called:")
            for calls, ms, query in top:
                print(f"  {'':32s} {calls:7d} × ({calls / max(1, c['posted']):.2f}/message, {ms:.0f} ms) {query}")
    for h in hooks:
        print(f"  webhooks, {h['label']}: {h['events']} of {h['expected']} delivery.accepted events, {h['rate']:.0f} events/s "
              f"(first POST to last arrival); delay from the change (created_at = accepted_at) to the receiver "
              f"p50 {h['p50']:.0f} ms, p99 {h['p99']:.0f} ms, max {h['max']:.0f} ms")
    print(f"  {'':30s} signatures verified (HMAC-SHA256, t within 5 min): {refused} refused; {repeats} events POSTed again; "
          f"{sum(h['mismatched'] for h in hooks)} with created_at != the delivery's accepted_at")
    print(f"  webhooks, drain of {drain['pending']} events written before the webhook was configured: {drain['received']} received, "
          f"{drain['rate']:.0f} events/s (first POST to last, {drain['span']:.1f} s); gateway CPU {drain['cpu_gateway']:.1f} s, "
          f"PostgreSQL {drain['cpu_pg']:.1f} s; {drain['refused']} refused, {drain['repeats']} POSTed again")
    for calls, ms, query in drain["statements"][1]:
        print(f"  {'':32s} {calls:7d} × ({ms:.0f} ms) {query}")

    # Issue #47's targets.
    by = {c["label"]: c for c in cases}
    single, batches = by["pg1"]["rate"] / by["sqlite"]["rate"], by["pg1-b"]["rate"] / by["sqlite-b"]["rate"]
    pg_ms = by["pg1"]["cpu"]["postgres"] / max(1, by["pg1"]["posted"]) * 1000
    pg_ms_b = by["pg1-b"]["cpu"]["postgres"] / max(1, by["pg1-b"]["posted"]) * 1000
    lat50, lat99 = percentile(latency, 50), percentile(latency, 99)
    wrk_hooks = hooks[-1]
    two = by["pg2"]
    two_cpu = two["cpu"]
    print("\nTargets (issue #47), this run:")
    print(f"  single messages on PostgreSQL >= 0.6x SQLite: {by['pg1']['rate']:.0f} against {by['sqlite']['rate']:.0f}/s, {single:.2f}x: {verdict(single >= 0.6)}")
    print(f"  batches of 100 on PostgreSQL >= 0.8x SQLite: {by['pg1-b']['rate']:.0f} against {by['sqlite-b']['rate']:.0f}/s, {batches:.2f}x: {verdict(batches >= 0.8)}")
    print(f"  PostgreSQL's CPU <= 0.6 ms per delivered message: {pg_ms:.2f} ms single, {pg_ms_b:.2f} ms in batches: "
          f"{verdict(pg_ms <= 0.6)} (single), {verdict(pg_ms_b <= 0.6)} (batches)")
    print(f"  intake to APNs accepting at {args.paced_rate} messages/s, p50 <= 20 ms and p99 <= 100 ms: p50 {lat50:.0f} ms, "
          f"p99 {lat99:.0f} ms over {len(latency)} messages: {verdict(lat50 <= 20 and lat99 <= 100)}")
    print(f"  webhooks >= 1500 events/s to one receiver: {drain['rate']:.0f}/s (drain): {verdict(drain['rate'] >= 1500)}; "
          f"p99 delay <= 1 s under wrk: {wrk_hooks['p99']:.0f} ms: {verdict(wrk_hooks['p99'] <= 1000)}")
    busiest = max(("the gateways", two_cpu["gateways"]), ("PostgreSQL", two_cpu["postgres"]), ("the local APNs", two_cpu["apns"]),
                  ("wrk", two_cpu["wrk"]), key=lambda x: x[1])
    window = two["elapsed"] * os.cpu_count()
    print(f"  two instances on one database: {two['rate']:.0f} deliveries/s ({two['rate'] / by['pg1']['rate']:.2f}x one instance); "
          f"the machine {min(1.0, two_cpu['machine'] / window):.0%} busy, {busiest[0]} the largest share ({busiest[1]:.1f} of "
          f"{two_cpu['machine']:.1f} busy core-seconds): " + ("bound by the machine's CPU" if two_cpu["machine"] / window >= 0.9
                                                              else "not CPU-bound: waits (commits, round trips) bound it"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
