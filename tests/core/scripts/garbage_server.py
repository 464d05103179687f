"""An HTTP server that creates a run like the tracker's API, then answers garbage.

usage: garbage_server.py PORT_FILE

``POST /api/v1/runs`` gets a run (id 1) as the dashboard's JSON API would; every other
request gets ``200 text/html`` that is not JSON, as a misconfigured proxy in front of the
dashboard would answer. Writes its port to PORT_FILE (whole: written, then renamed) and
serves until killed.
"""

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.command == "POST" and self.path == "/api/v1/runs":
            body = json.dumps({
                "id": 1, "project": "never-stops", "name": "run-1", "status": "running",
                "config": {}, "tags": [], "created_at": time.time(),
            }).encode()  # fmt: skip
            kind = "application/json"
        else:
            body, kind = b"<html><body>502 upstream says hello</body></html>", "text/html"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
port_file = sys.argv[1]
with open(port_file + ".tmp", "w") as fh:
    fh.write(str(server.server_address[1]))
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
