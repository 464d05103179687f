"""A real HTTP server for a WSGI app on a free loopback port, served by a thread
(shared by the API tests and the browser tests)."""

from __future__ import annotations

import threading
from typing import Any

from werkzeug.serving import BaseWSGIServer, make_server


class ServerThread:
    """Serves ``app`` on 127.0.0.1 and a free port until ``stop()``."""

    def __init__(self, app: Any) -> None:
        self.server: BaseWSGIServer = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)
        self.server.server_close()
