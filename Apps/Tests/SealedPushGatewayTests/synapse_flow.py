#!/usr/bin/env python3
"""A real Synapse against the SealedPush gateway (matrix v1 §5), driven as a Matrix client would.

Run with the Python of the venv holding `matrix-synapse` (`make synapse-venv`):

    synapse_flow.py SPEC.json WORKDIR

SPEC.json: {"gateway": "http://127.0.0.1:PORT", "pushers": [{"app_id", "pushkey", "data": {...}}, ...],
            "fail_once_app_id": "<app_id whose first notify is answered 503 after the gateway took it>",
            "rejected_app_id": "<app_id the gateway does not know: Synapse must drop its pusher>"}

It generates a Synapse configuration in WORKDIR (SQLite, loopback, registration without verification, pushes to
loopback allowed), starts Synapse, registers two users, makes a room, sets bob's pushers with `data.url` pointing
at a small proxy in front of the gateway (which answers the first notify of `fail_once_app_id` with 503 after the
gateway answered it, so Synapse retries), sends a message as alice, waits until every pusher's notify reached
the gateway and the rejected pusher is gone, stops Synapse and prints one JSON line:

    {"room_id", "event_id", "notifies": {app_id: [status, ...]}, "pushers_after": [app_id, ...], "rejected_seen": [...]}

Every wait is bounded; on a failure it prints {"error": "..."} and exits 1. Synapse's log is WORKDIR/homeserver.log.
"""
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import yaml


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(method, url, body=None, token=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            return error.code, json.loads(raw or b"{}")
        except ValueError:
            return error.code, {"raw": raw.decode(errors="replace")}


def wait_for(what, predicate, within):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise RuntimeError("timed out after %ss waiting for %s" % (within, what))


class Proxy:
    """Forwards notifies to the gateway; answers the first one of `fail_once` with 503 after the gateway took it."""

    def __init__(self, gateway, fail_once):
        self.gateway = gateway
        self.fail_once = fail_once
        self.failed = False
        self.lock = threading.Lock()
        self.notifies = {}   # app_id -> [status answered to Synapse, ...]
        self.rejected = []   # pushkeys the gateway rejected
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    app_id = json.loads(body)["notification"]["devices"][0]["app_id"]
                except (ValueError, KeyError, IndexError, TypeError):
                    app_id = "?"
                request = urllib.request.Request(proxy.gateway + self.path, data=body, method="POST")
                request.add_header("Content-Type", "application/json")
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        status, answer = response.status, response.read()
                except urllib.error.HTTPError as error:
                    status, answer = error.code, error.read()
                except OSError as error:
                    status, answer = 502, json.dumps({"errcode": "M_UNKNOWN", "error": str(error)}).encode()
                with proxy.lock:
                    if status == 200:
                        proxy.rejected += json.loads(answer).get("rejected", [])
                    if status == 200 and app_id == proxy.fail_once and not proxy.failed:
                        # The gateway queued it; the homeserver is told 503 and retries the same notification.
                        proxy.failed = True
                        status, answer = 503, b'{"errcode": "M_UNKNOWN", "error": "injected by the test"}'
                    proxy.notifies.setdefault(app_id, []).append(status)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def snapshot(self):
        with self.lock:
            return {k: list(v) for k, v in self.notifies.items()}, list(self.rejected)


def configure(workdir, port):
    python = sys.executable
    path = os.path.join(workdir, "homeserver.yaml")
    subprocess.run([python, "-m", "synapse.app.homeserver", "--server-name", "localhost", "--config-path", path,
                    "--data-directory", workdir, "--generate-config", "--report-stats=no"],
                   check=True, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    with open(path) as f:
        config = yaml.safe_load(f)
    log_config = os.path.join(workdir, "log.yaml")
    with open(log_config, "w") as f:
        yaml.safe_dump({"version": 1, "formatters": {"plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
                        "handlers": {"file": {"class": "logging.FileHandler", "formatter": "plain",
                                              "filename": os.path.join(workdir, "homeserver.log")}},
                        "root": {"level": "INFO", "handlers": ["file"]}, "disable_existing_loggers": False}, f)
    unlimited = {"per_second": 10000, "burst_count": 10000}
    config.update({
        "listeners": [{"port": port, "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False, "x_forwarded": False,
                       "resources": [{"names": ["client"], "compress": False}]}],
        "database": {"name": "sqlite3", "args": {"database": os.path.join(workdir, "homeserver.db")}},
        "log_config": log_config,
        "enable_registration": True,
        "enable_registration_without_verification": True,
        # The gateway listens on loopback: let the pusher reach it (Synapse refuses private addresses by default).
        "ip_range_blacklist": [],
        "ip_range_whitelist": ["127.0.0.1"],
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "report_stats": False,
        "presence": {"enabled": False},
        "rc_message": unlimited,
        "rc_registration": unlimited,
        "rc_joins": {"local": unlimited, "remote": unlimited},
        "rc_login": {"address": unlimited, "account": unlimited, "failed_attempts": unlimited},
    })
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    return path


def register(base, name):
    body = {"username": name, "password": "correct horse " + name, "inhibit_login": False}
    status, answer = call("POST", base + "/_matrix/client/v3/register", body)
    if status == 401:
        body["auth"] = {"type": "m.login.dummy", "session": answer.get("session")}
        status, answer = call("POST", base + "/_matrix/client/v3/register", body)
    if status != 200:
        raise RuntimeError("register %s: %s %s" % (name, status, answer))
    return answer["user_id"], answer["access_token"]


def main():
    spec = json.load(open(sys.argv[1]))
    workdir = os.path.abspath(sys.argv[2])
    os.makedirs(workdir, exist_ok=True)
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    proxy = Proxy(spec["gateway"], spec.get("fail_once_app_id"))
    synapse = None
    try:
        config = configure(workdir, port)
        log = open(os.path.join(workdir, "synapse.out"), "w")
        synapse = subprocess.Popen([sys.executable, "-m", "synapse.app.homeserver", "-c", config], cwd=workdir,
                                   stdout=log, stderr=subprocess.STDOUT)

        def up():
            if synapse.poll() is not None:
                raise RuntimeError("synapse exited with %s; see %s" % (synapse.returncode, workdir))
            try:
                return call("GET", base + "/_matrix/client/versions", timeout=2)[0] == 200
            except OSError:
                return False
        wait_for("synapse to answer", up, 120)

        alice, alice_token = register(base, "alice")
        bob, bob_token = register(base, "bob")
        status, room = call("POST", base + "/_matrix/client/v3/createRoom", {"invite": [bob], "preset": "private_chat"}, alice_token)
        if status != 200:
            raise RuntimeError("createRoom: %s %s" % (status, room))
        room_id = room["room_id"]
        status, answer = call("POST", base + "/_matrix/client/v3/join/" + urllib.request.quote(room_id), {}, bob_token)
        if status != 200:
            raise RuntimeError("join: %s %s" % (status, answer))

        url = "http://127.0.0.1:%d/_matrix/push/v1/notify" % proxy.port
        for pusher in spec["pushers"]:
            data = dict(pusher["data"])
            data["url"] = url
            body = {"kind": "http", "app_id": pusher["app_id"], "pushkey": pusher["pushkey"], "app_display_name": "SealedPush test",
                    "device_display_name": pusher["app_id"], "lang": "en", "data": data, "append": True}
            status, answer = call("POST", base + "/_matrix/client/v3/pushers/set", body, bob_token)
            if status != 200:
                raise RuntimeError("pushers/set %s: %s %s" % (pusher["app_id"], status, answer))

        status, sent = call("PUT", base + "/_matrix/client/v3/rooms/%s/send/m.room.message/txn1" % urllib.request.quote(room_id),
                            {"msgtype": "m.text", "body": "the secret text"}, alice_token)
        if status != 200:
            raise RuntimeError("send: %s %s" % (status, sent))
        event_id = sent["event_id"]

        expected = {p["app_id"] for p in spec["pushers"]}

        def delivered():
            notifies, _ = proxy.snapshot()
            ok = all(200 in notifies.get(app_id, []) for app_id in expected)
            return ok and (not spec.get("fail_once_app_id") or proxy.failed)
        wait_for("a 200 notify for every pusher (%s)" % sorted(expected), delivered, 90)

        rejected_app = spec.get("rejected_app_id")

        def pushers():
            status, answer = call("GET", base + "/_matrix/client/v3/pushers", token=bob_token)
            return [p["app_id"] for p in answer.get("pushers", [])] if status == 200 else None
        if rejected_app:
            wait_for("synapse to drop the rejected pusher", lambda: rejected_app not in (pushers() or [rejected_app]), 30)
        notifies, rejected = proxy.snapshot()
        print(json.dumps({"room_id": room_id, "event_id": event_id, "alice": alice, "bob": bob, "notifies": notifies,
                          "pushers_after": pushers(), "rejected_seen": rejected}), flush=True)
    except Exception as error:  # noqa: BLE001 - reported to the Swift test as one line
        print(json.dumps({"error": "%s: %s" % (type(error).__name__, error)}), flush=True)
        sys.exit(1)
    finally:
        if synapse is not None and synapse.poll() is None:
            synapse.terminate()
            try:
                synapse.wait(timeout=15)
            except subprocess.TimeoutExpired:
                synapse.kill()
                synapse.wait()
        proxy.server.shutdown()


if __name__ == "__main__":
    main()
