#!/usr/bin/env python3
"""Deliveries per second to each platform through its local push service (issue #38 item 7), against
`sealedpush send --batch` to the local APNs on the same machine.

One gateway on SQLite serves one app with all three platforms (platforms v1): `apns` to
`sealedpush-server apns serve --accept-unknown`, `fcm` to `sealedpush-server fcm serve --accept-unknown` (its
token endpoint and `messages:send`), `webpush` to `sealedpush-server webpush serve --accept-unknown` (VAPID,
`aes128gcm`). Each platform has its own --users users with one device each. For each platform in turn, wrk posts
batches of 100 messages (gateway v1 §5.1) to that platform's users for --seconds; the figure is deliveries the
push service accepted per second, from the first request to the last acceptance (the gateway's
`sealedpush_gateway_deliveries_total{state="accepted"}`), with the CPU per message of the gateway and of the
push service. Then `send --batch` sends the same number of pushes as the APNs phase to the same local APNs.

There is no target in the issue: the figures are reported, each beside `send --batch`. Everything shares this
machine's cores (wrk, the gateway, the push services); the local services check every request as their real
counterparts would (FCM: the bearer token, the message's shape; Web Push: VAPID's ES256 signature, the RFC 8188
header) but do not decrypt (--accept-unknown drops what they accept).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gateway import (API_KEY, Gateway, cpu_seconds, make_keys, start_apns, write_config, wrk_batch)  # noqa: E402


def start_service(server_bin, work, args, name):
    """A local push service (`sealedpush-server ARGS`) on a free loopback port; (process, base URL)."""
    log = open(os.path.join(work, name + ".log"), "wb")
    proc = subprocess.Popen([server_bin, *args, "--listen", "127.0.0.1:0", "--log-level", "warning"], cwd=work,
                            stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        raise RuntimeError(f"{name} did not start; see {name}.log")
    return proc, line.split()[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--server-bin", required=True)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--users", type=int, default=1000)
    args = ap.parse_args()
    sp, server_bin = os.path.abspath(args.bin), os.path.abspath(args.server_bin)
    work = tempfile.mkdtemp(prefix="sealedpush-bench-platforms-")
    key_path, record = make_keys(sp, server_bin, work)
    apns, apns_url, _ = start_apns(server_bin, work, key_path)
    account = os.path.join(work, "sa.json")
    subprocess.run([server_bin, "fcm", "generate-service-account", "--project", "bench-project", "--out", account], check=True,
                   stdout=subprocess.DEVNULL)
    fcm, fcm_url = start_service(server_bin, work, ["fcm", "serve", "--service-account", account, "--ca-out", "fcm-ca.pem",
                                                    "--accept-unknown"], "fcm")
    vapid = os.path.join(work, "vapid.p8")
    subprocess.run([server_bin, "webpush", "generate-vapid", "--out", vapid], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    webpush, webpush_url = start_service(server_bin, work, ["webpush", "serve", "--ca-out", "webpush-ca.pem", "--accept-unknown"], "webpush")
    # One set of browser keys, reused by every subscription (the endpoints differ): the encryption per message is
    # the same work whoever holds the keys.
    subscription = json.loads(subprocess.run([sp, "device", "subscribe", "--keychain", os.path.join(work, "phone"),
                                              "--endpoint", webpush_url + "/push/w0"], check=True, capture_output=True, text=True).stdout)
    services = {"apns": apns, "fcm": fcm, "webpush": webpush}
    gateway = None
    results = []
    try:
        digest = subprocess.run(["sha256sum"], input=API_KEY, capture_output=True, text=True).stdout.split()[0]
        app = {"id": "bench", "topic": "com.example.bench",
               "apns": {"auth_key": key_path, "key_id": "BENCH00KEY", "team_id": "BENCHTEAM0",
                        "production_url": apns_url, "sandbox_url": apns_url, "ca_cert": os.path.join(work, "ca.pem")},
               "fcm": {"service_account": account, "url": fcm_url, "token_url": fcm_url + "/token",
                       "ca_cert": os.path.join(work, "fcm-ca.pem")},
               "webpush": {"vapid_key": vapid, "subject": "mailto:bench@example.com", "allow_private_endpoints": True,
                           "ca_cert": os.path.join(work, "webpush-ca.pem")},
               "api_keys": [{"id": "bench", "sha256": digest, "scopes": ["send", "devices", "read"]}],
               "max_in_flight": 100, "max_queue": 10_000_000, "rate_limit": 1_000_000}
        config = {"listen": "127.0.0.1:0", "admin_listen": "127.0.0.1:0", "public_url": "http://127.0.0.1:1",
                  "database": "sqlite:gateway.db", "apps": [app]}
        gateway = Gateway(server_bin, write_config(work, config), work)
        for u in range(args.users):
            for user, device, body in (
                    (f"a{u}", f"a{u}", {"apns_token": f"{u + 1:064x}", "environment": "production"}),
                    (f"f{u}", f"f{u}", {"platform": "fcm", "fcm_token": f"bench{u:06d}:APA91bH-" + "t" * 40}),
                    (f"w{u}", f"w{u}", {"platform": "webpush", "webpush": {"endpoint": f"{webpush_url}/push/w{u}",
                                                                           "keys": subscription["keys"]}})):
                status, text = gateway.call("PUT", f"/v1/apps/bench/devices/{device}", {"user_id": user, "key_record": record, **body})
                if status != 201:
                    raise RuntimeError(f"registering {device}: {status} {text[:300]!r}")

        for platform, prefix in (("apns", "a"), ("fcm", "f"), ("webpush", "w")):
            accepted0 = gateway.metric("sealedpush_gateway_deliveries_total", "accepted")
            cpu0 = (cpu_seconds(gateway.proc.pid), cpu_seconds(services[platform].pid))
            start = time.time()
            requests, errors, p50, p99, _ = wrk_batch(gateway.port, args.seconds, args.users, work, prefix=prefix)
            messages = (requests - errors) * 100
            end = gateway.wait_drained(accepted0 + messages)
            results.append({"platform": platform, "messages": messages, "errors": errors, "rate": messages / (end - start),
                            "gateway_us": (cpu_seconds(gateway.proc.pid) - cpu0[0]) / max(1, messages) * 1e6,
                            "service_us": (cpu_seconds(services[platform].pid) - cpu0[1]) / max(1, messages) * 1e6,
                            "p50": p50, "p99": p99})

        apns_messages = results[0]["messages"]
        batch = os.path.join(work, "batch.jsonl")
        with open(batch, "w") as f:
            for i in range(apns_messages):
                f.write(json.dumps({"to": record, "body": f"bench message {i}", "device_token": f"{(i % args.users) + 1:064x}"}) + "\n")
        t0 = time.time()
        sent = subprocess.run([sp, "send", "--auth-key", key_path, "--team-id", "BENCHTEAM0", "--topic", "com.example.bench",
                               "--environment", apns_url, "--ca-cert", os.path.join(work, "ca.pem"), "--concurrency", "100",
                               "--batch", batch], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if sent.returncode != 0:
            raise RuntimeError("send --batch failed: " + sent.stderr[-500:])
        send_rate = apns_messages / (time.time() - t0)
    finally:
        if gateway:
            gateway.proc.send_signal(signal.SIGTERM)
            gateway.proc.wait()
        for proc in services.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait()

    print(f"\nDeliveries per platform through the gateway (SQLite, batches of 100 from wrk -c 8 for {args.seconds} s each, "
          f"{args.users} users of one device per platform; wrk, the gateway and the local push services share this machine)")
    print(f"  sealedpush send --batch to the local APNs   {send_rate:8.0f} pushes/s   ({apns_messages} pushes)")
    for r in results:
        print(f"  gateway to {r['platform']:<8} {r['rate']:8.0f} deliveries/s = {r['rate'] / send_rate:4.2f}x send --batch   "
              f"({r['messages']} messages, {r['errors']} refused; CPU per message: gateway {r['gateway_us']:.0f} µs, "
              f"push service {r['service_us']:.0f} µs; batch p50 {r['p50']:.0f} ms, p99 {r['p99']:.0f} ms)")
    print("  (no target in issue #38: figures reported beside send --batch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
