"""A dashboard server in its own process, so a test can watch its memory:

    python serve_dashboard.py STORE_URL TOKEN

Serves ``create_app`` (default limits, the given token) on 127.0.0.1 with a free port, threaded like
the production server, and prints ``LISTENING <port>``; runs until killed.
"""

from __future__ import annotations

import sys

from werkzeug.serving import make_server

from tracker.web.app import create_app


def main() -> None:
    app = create_app({"STORE_URI": sys.argv[1], "TOKEN": sys.argv[2]})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    print("LISTENING", server.server_port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
