#!/usr/bin/env python3
"""The gateway's Matrix endpoint side by side with Sygnal (issue #48 item 5), behind the same local APNs.

`sealedpush-server apns serve --accept-unknown` on loopback is the one APNs. Sygnal (the Matrix reference push
gateway, run from --sygnal-python's venv) has an APNs app `im.bench.ios` on it: token auth with the bench's key,
aioapns pointed at the local APNs and its CA by a small launcher (Sygnal has no setting for either); nothing else
of Sygnal is changed. The gateway (SQLite) has app `bench` serving the same `app_id` on the same APNs.

Both get the same load: wrk posts `POST /_matrix/push/v1/notify` for --seconds over --connections connections,
one device per notification (Synapse sends one request per pusher), --devices pushers in turn, each with
`format: event_id_only` and the device's SealedPush key record in `data` (Sygnal ignores it), every request a new
`event_id`. A warm-up notifies every pusher once first (the gateway makes each Matrix device on its first notify).

Figures, for each gateway:
- notifies per second, from the first request to the last push the local APNs accepted (the gateway answers once
  the delivery is durably queued and pushes after; Sygnal answers after APNs answered, so its rate ends with wrk);
- CPU per notify of the gateway process (user + system, /proc), over the same span;
- p50 and p99 of the answer (wrk --latency);
- pushes the local APNs accepted, against the notifies answered 200.

The gateway's figure carries a durable commit (SQLite, before the answer) and a seal per device, which Sygnal does
not do: printed beside it. Everything shares this machine's cores (wrk, the gateway under test, the local APNs).
There is no target in the issue: the figures are reported.
"""

import argparse
import base64
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gateway import API_KEY, WRK_DONE_LUA, Gateway, cpu_seconds, make_keys, run_wrk_script, write_config  # noqa: E402

APP_ID = "im.bench.ios"
NOTIFY = "/_matrix/push/v1/notify"

# Runs Sygnal with aioapns pointed at the local APNs (host, port, CA): Sygnal itself is unchanged.
LAUNCHER = r'''
import os, ssl, sys
src = os.environ.get("SYGNAL_SRC")
if src:
    sys.path.insert(0, src)
import aioapns
from aioapns import connection
connection.APNsProductionClientProtocol.APNS_SERVER = "127.0.0.1"
connection.APNsProductionClientProtocol.APNS_PORT = int(os.environ["BENCH_APNS_PORT"])
_init = aioapns.APNs.__init__
def _with_local_ca(self, *args, **kwargs):
    context = ssl.create_default_context(cafile=os.environ["BENCH_APNS_CA"])
    context.set_alpn_protocols(["h2"])
    kwargs.setdefault("ssl_context", context)
    _init(self, *args, **kwargs)
aioapns.APNs.__init__ = _with_local_ca
from sygnal.sygnal import main
main()
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pushkey(i):
    """The i-th device's pushkey as Sygnal (and Element) sets it: base64 of the 32-byte token."""
    return base64.b64encode(bytes.fromhex(f"{i + 1:064x}")).decode()


def notification(event_id, key, record):
    # As Synapse sends a notification for a pusher with `format: event_id_only`: no type, sender or content.
    return {"notification": {"event_id": event_id, "room_id": "!bench:example.org", "prio": "high", "counts": {"unread": 1},
                             "devices": [{"app_id": APP_ID, "pushkey": key, "pushkey_ts": 1,
                                          "data": {"format": "event_id_only", "sealedpush_key": record}}]}}


def post(port, body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{NOTIFY}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as r:
        return r.status, json.loads(r.read())


def wrk_notify(port, seconds, devices, record, work, name, connections):
    """wrk posting one notification per request, each to the next pusher, a new event_id each; requests, errors (wrk's
    and answers other than 200 {"rejected": []}), p50, p99 ms, duration s."""
    record_json = json.dumps(record).replace("\\", "\\\\").replace("'", "\\'")
    keys = ",".join(f"'{pushkey(i)}'" for i in range(devices))
    script = os.path.join(work, name + ".lua")
    with open(script, "w") as f:
        f.write(f"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local keys = {{{keys}}}
local record = '{record_json}'
local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local n = 0
request = function()
  n = n + 1
  local key = keys[(n * 7 + tid) % #keys + 1]
  local body = '{{"notification":{{"event_id":"$' .. tid .. '_' .. n .. '_{name}:example.org","room_id":"!bench:example.org",' ..
    '"prio":"high","counts":{{"unread":1}},' ..
    '"devices":[{{"app_id":"{APP_ID}","pushkey":"' .. key .. '","pushkey_ts":1,' ..
    '"data":{{"format":"event_id_only","sealedpush_key":' .. record .. '}}}}]}}}}'
  return wrk.format(nil, "{NOTIFY}", nil, body)
end
response = function(status, headers, body)
  if status ~= 200 or not string.find(body, '"rejected":%s*%[%]') then
    io.write("BAD " .. status .. "\\n")
  end
end
""" + WRK_DONE_LUA)
    return run_wrk_script(port, seconds, script, connections)


class APNs:
    """The local APNs, counting the pushes it accepted (its info log has one line per push)."""

    def __init__(self, server_bin, work, key_path):
        self.log_path = os.path.join(work, "apns.log")
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([server_bin, "apns", "serve", "--public-key", key_path.replace(".p8", ".pub.pem"),
                                      "--team-id", "BENCHTEAM0", "--topic", "com.example.bench", "--accept-unknown",
                                      "--listen", "127.0.0.1:0", "--ca-out", os.path.join(work, "ca.pem"), "--log-level", "info"],
                                     cwd=work, stdout=subprocess.PIPE, stderr=log, text=True)
        self.url = self.proc.stdout.readline().split()[2]
        self.port = int(self.url.rsplit(":", 1)[1].strip("/"))
        self.ca = os.path.join(work, "ca.pem")
        self.offset = 0
        self.count = 0

    def accepted(self):
        """Pushes accepted so far: the log read on from where the last call stopped (at a line's end), so that waiting
        costs little CPU beside the gateway being measured."""
        with open(self.log_path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1
        self.count += sum(1 for line in chunk[:end].split(b"\n") if b" accepted" in line)
        self.offset += end
        return self.count

    def wait_accepted(self, target, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.accepted() >= target:
                return time.time()
            time.sleep(0.1)
        raise RuntimeError(f"the local APNs did not accept {target} pushes within {timeout} s (it has {self.accepted()})")


def start_sygnal(python, src, work, key_path, apns):
    """Sygnal on a free loopback port with one APNs app on the local APNs; (process, port)."""
    port = free_port()
    config = os.path.join(work, "sygnal.yaml")
    with open(config, "w") as f:
        # JSON is YAML: Sygnal reads it as its sygnal.yaml. Logging at WARNING, as the gateway's.
        json.dump({"http": {"bind_addresses": ["127.0.0.1"], "port": port},
                   "log": {"setup": {"version": 1, "formatters": {"plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
                                     "handlers": {"file": {"class": "logging.FileHandler", "filename": os.path.join(work, "sygnal.log"),
                                                           "formatter": "plain"}},
                                     "root": {"level": "WARNING", "handlers": ["file"]}, "disable_existing_loggers": False},
                           "access": {"x_forwarded_for": False}},
                   "apps": {APP_ID: {"type": "apns", "keyfile": key_path, "key_id": "BENCH00KEY", "team_id": "BENCHTEAM0",
                                     "topic": "com.example.bench", "platform": "production"}}}, f)
    launcher = os.path.join(work, "run_sygnal.py")
    with open(launcher, "w") as f:
        f.write(LAUNCHER)
    # RUN_DESPITE_UNSUPPORTED: the archived matrix-org/sygnal exits at start without it (element-hq/sygnal ignores it).
    env = dict(os.environ, SYGNAL_CONF=config, BENCH_APNS_PORT=str(apns.port), BENCH_APNS_CA=apns.ca, SYGNAL_SRC=src or "",
               RUN_DESPITE_UNSUPPORTED="Y")
    proc = subprocess.Popen([python, launcher], cwd=work, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "sygnal.stderr"), "wb"))
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"Sygnal exited at start; see {work}/sygnal.stderr and sygnal.log")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("Sygnal did not listen within 60 s")


def run(name, port, pid, apns, args, record, work):
    """Warm-up, then the measured load; the figures."""
    before = apns.accepted()
    for i in range(args.devices):
        status, answer = post(port, notification(f"$warm{i}_{name}:example.org", pushkey(i), record))
        if status != 200 or answer.get("rejected"):
            raise RuntimeError(f"{name}: the warm-up notify was answered {status} {answer}")
    apns.wait_accepted(before + args.devices)
    time.sleep(1)
    accepted0 = apns.accepted()
    cpu0 = cpu_seconds(pid)
    start = time.time()
    requests, errors, p50, p99, _ = wrk_notify(port, args.seconds, args.devices, record, work, name, args.connections)
    answered = requests - errors
    end = apns.wait_accepted(accepted0 + answered)
    cpu = cpu_seconds(pid) - cpu0
    return {"name": name, "answered": answered, "errors": errors, "rate": answered / (end - start),
            "cpu_us": cpu / max(1, answered) * 1e6, "p50": p50, "p99": p99, "pushes": apns.accepted() - accepted0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="the sealedpush CLI (makes the phone's key record)")
    ap.add_argument("--server-bin", required=True)
    ap.add_argument("--sygnal-python", required=True, help="the Python of a venv with Sygnal's dependencies")
    ap.add_argument("--sygnal-src", default="", help="Sygnal's source tree, when it is not installed in that venv")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--devices", type=int, default=200)
    ap.add_argument("--connections", type=int, default=32)
    args = ap.parse_args()
    sp, server_bin = os.path.abspath(args.bin), os.path.abspath(args.server_bin)
    src = os.path.abspath(args.sygnal_src) if args.sygnal_src else ""
    sygnal_python = os.path.abspath(args.sygnal_python)
    load = os.getloadavg()
    work = tempfile.mkdtemp(prefix="sealedpush-bench-matrix-")
    key_path, record = make_keys(sp, server_bin, work)
    apns = APNs(server_bin, work, key_path)
    gateway = sygnal = None
    results = []
    try:
        config = {"listen": "127.0.0.1:0", "admin_listen": "127.0.0.1:0", "public_url": "http://127.0.0.1:1",
                  "database": "sqlite:gateway.db",
                  "apps": [{"id": "bench", "topic": "com.example.bench",
                            "apns": {"auth_key": key_path, "key_id": "BENCH00KEY", "team_id": "BENCHTEAM0",
                                     "production_url": apns.url, "sandbox_url": apns.url, "ca_cert": apns.ca},
                            "matrix": {"app_ids": {APP_ID: {"platform": "apns", "environment": "production"}},
                                       "allowed_sources": ["127.0.0.0/8"]},
                            "api_keys": [{"id": "bench", "sha256": hashlib.sha256(API_KEY.encode()).hexdigest(), "scopes": ["read"]}],
                            "max_in_flight": 100, "max_queue": 10_000_000, "rate_limit": 1_000_000}]}
        gateway = Gateway(server_bin, write_config(work, config), work)
        results.append(run("sealedpush", gateway.port, gateway.proc.pid, apns, args, record, work))
        gateway.proc.send_signal(signal.SIGTERM)
        gateway.proc.wait()
        gateway = None
        sygnal, sygnal_port = start_sygnal(sygnal_python, src, work, key_path, apns)
        results.append(run("sygnal", sygnal_port, sygnal.pid, apns, args, record, work))
    finally:
        for proc in (gateway.proc if gateway else None, sygnal, apns.proc):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    print(f"\nMatrix notifies, the gateway against Sygnal, behind the same local APNs (wrk -c {args.connections} for "
          f"{args.seconds} s each, one pusher per notify, {args.devices} pushers; wrk, the gateway under test and the "
          f"local APNs share this machine; load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
    for r in results:
        note = ("  durable commit + seal, which Sygnal does not do" if r["name"] == "sealedpush"
                else "  (answers after APNs did; nothing stored, nothing sealed)")
        print(f"  {r['name']:<10} {r['rate']:7.0f} notifies/s   CPU per notify {r['cpu_us']:6.0f} µs   "
              f"answer p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms   ({r['answered']} answered 200, {r['errors']} not, "
              f"{r['pushes']} pushes at APNs){note}")
    if len(results) == 2 and results[1]["rate"] > 0:
        ours, theirs = results
        print(f"  SealedPush/Sygnal: {ours['rate'] / theirs['rate']:.2f}x the notifies per second, "
              f"{ours['cpu_us'] / max(1e-9, theirs['cpu_us']):.2f}x the CPU per notify")
    print("  (no target in issue #48: figures reported side by side)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
