"""An independent receipt endpoint for the tests: Python's http.server, reading each POST as receipts v1 §2 says.

Prints its port on the first line, answers every POST 204, and appends one JSON verdict line per request to the
file named by argv[1]: {"ok": true, "fields": {...}} or {"ok": false, "why": "..."}.
"""
import base64, http.server, json, sys

verdicts = sys.argv[1]


def check(headers, body):
    if headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
        return "Content-Type is not application/json"
    try:
        o = json.loads(body.decode("utf-8"))
    except Exception as e:  # noqa: BLE001
        return "not UTF-8 JSON: %s" % e
    if not isinstance(o, dict):
        return "not an object"
    allowed = {"v", "type", "id", "token", "at", "attachments"}
    if set(o) - allowed:
        return "unexpected members %s" % sorted(set(o) - allowed)
    if o.get("v") != 1 or type(o.get("v")) is not int:
        return "v is not the integer 1"
    if o.get("type") != "delivered":
        return "type is not delivered"
    if not isinstance(o.get("id"), str) or not 1 <= len(o["id"]) <= 64:
        return "id is not a 1-64 character string"
    token = o.get("token")
    if not isinstance(token, str) or "=" in token:
        return "token is not unpadded base64url"
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except Exception:  # noqa: BLE001
        return "token does not decode"
    if not 16 <= len(raw) <= 64:
        return "token holds %d bytes" % len(raw)
    if type(o.get("at")) is not int or o["at"] <= 0:
        return "at is not a positive integer"
    return o


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        result = check(self.headers, body)
        line = {"ok": False, "why": result} if isinstance(result, str) else {"ok": True, "fields": result, "path": self.path}
        with open(verdicts, "a") as f:
            f.write(json.dumps(line) + "\n")
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
