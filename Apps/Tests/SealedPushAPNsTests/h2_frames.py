"""A raw HTTP/2 client (python-hyper's h2) against the local APNs: frame by frame, as APNs answers.

argv: port, CA file, device token, provider token (JWT), topic. Sends two requests on one connection,
with `host` and no `:authority` (as aioapns does): an accepted push and one with an unknown topic, and
a third whose body never comes ("stalled": the server must reset it after its request timeout).
Prints one JSON object: for each stream, the status, the `server` header, whether the response HEADERS
frame ended the stream, the DATA bytes, and whether the server reset it.
"""
import json
import socket
import ssl
import sys

import h2.config
import h2.connection
import h2.events

port, ca, token, jwt, topic = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
context = ssl.create_default_context(cafile=ca)
context.set_alpn_protocols(["h2"])
sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1")
assert sock.selected_alpn_protocol() == "h2", sock.selected_alpn_protocol()
conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
conn.initiate_connection()
streams = {}
for name, push_topic in (("accepted", topic), ("refused", "com.not.allowed")):
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/" + token), ("host", "127.0.0.1"),
                            ("authorization", "bearer " + jwt), ("apns-topic", push_topic), ("apns-push-type", "alert")])
    conn.send_data(sid, b'{"aps":{"alert":"x"}}', end_stream=True)
    streams[sid] = {"name": name, "status": None, "server": None, "headers_ended_stream": None, "data": "", "ended": False,
                    "reset": False}
sid = conn.get_next_available_stream_id()
conn.send_headers(sid, [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/" + token), ("host", "127.0.0.1"),
                        ("authorization", "bearer " + jwt), ("apns-topic", topic), ("apns-push-type", "alert")])
streams[sid] = {"name": "stalled", "status": None, "server": None, "headers_ended_stream": None, "data": "", "ended": False,
                "reset": False}
sock.sendall(conn.data_to_send())
while not all(s["ended"] for s in streams.values()):
    chunk = sock.recv(65536)
    if not chunk:
        break
    for event in conn.receive_data(chunk):
        if isinstance(event, h2.events.ResponseReceived):
            s = streams[event.stream_id]
            s["status"] = dict(event.headers)[":status"]
            s["server"] = dict(event.headers).get("server")
            s["headers_ended_stream"] = event.stream_ended is not None
        elif isinstance(event, h2.events.DataReceived):
            streams[event.stream_id]["data"] += event.data.decode()
            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            streams[event.stream_id]["ended"] = True
        elif isinstance(event, h2.events.StreamReset):
            streams[event.stream_id]["ended"] = True
            streams[event.stream_id]["reset"] = True
    sock.sendall(conn.data_to_send())
print(json.dumps({s["name"]: s for s in streams.values()}))
