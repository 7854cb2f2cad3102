#!/usr/bin/env python3
"""Follow a `cohort serve` team's live feed (GET /ws) and print one line per change.

    python3 docs/watch.py TOKEN [http://127.0.0.1:7878]

Python's standard library only: it speaks just enough of the websocket protocol to read the
server's text frames (the feed never needs the client to write). Stop it with Ctrl-C.
"""
import base64, json, os, socket, sys
from urllib.parse import urlsplit

token = sys.argv[1]
url = urlsplit(sys.argv[2] if len(sys.argv) > 2 else "http://127.0.0.1:7878")
s = socket.create_connection((url.hostname, url.port or 80))
s.sendall((f"GET /ws?token={token} HTTP/1.1\r\nHost: {url.netloc}\r\n"
           "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
           f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\n\r\n").encode())
f = s.makefile("rb")
status = f.readline().decode().strip()
if " 101 " not in status + " ":
    sys.exit(f"no feed: {status}")
while f.readline() not in (b"\r\n", b""):  # the rest of the 101 answer's head
    pass
while True:
    head = f.read(2)
    if len(head) < 2:
        break
    n = head[1] & 127
    if n >= 126:
        n = int.from_bytes(f.read(2 if n == 126 else 8), "big")
    data, opcode = f.read(n), head[0] & 15
    if opcode == 8:  # closed by the server: the code and reason
        code = int.from_bytes(data[:2], "big") if len(data) >= 2 else None
        print("closed", code, data[2:].decode(errors="replace"))
        break
    if opcode != 1:  # only text frames carry JSON
        continue
    frame = json.loads(data)
    if frame["type"] == "snapshot":
        s_ = frame["states"]
        print(f"snapshot at version {frame['version']}:",
              ", ".join(f"{len(s_.get(k, {}))} {k}s" for k in ("task", "stage", "agent", "step")))
    elif frame["type"] == "writing":  # a streamed answer being written (not a state change)
        print(f"  writing {frame['agent_id']}: {frame['text'][-60:]!r}")
    for e in frame.get("events", []):
        who = (e.get("agent_id") or e.get("task_id") or e.get("stage_id") or e.get("step_id")
               or e.get("agent", {}).get("agent_id") or "")
        what = (e.get("task", {}).get("task_name") or e.get("stage", {}).get("stage_intention")
                or e.get("step", {}).get("step_intention") or e.get("execution_state")
                or e.get("text") or e.get("summary") or e.get("state") or "")
        print(f"{e['version']:>5} {e['kind']:<5} {e['op']:<15} {who[:8]:<8} {str(what)[:80]!s}")
    sys.stdout.flush()
