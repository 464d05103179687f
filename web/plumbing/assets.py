"""The dashboard's own static files (``web/static``): content-hashed URLs, a year-long cache
for them, gzip.

* URLs: ``url_for("static", filename="run.js")`` is ``/static/run.js?v=<sha256[:12]>`` (a
  ``url_defaults`` hook adds the hash of the file's bytes), so every template gets a URL
  that changes exactly when the file does.
* caching: a request whose ``v`` is the file's current hash is answered with
  ``Cache-Control: public, max-age=31536000, immutable`` -- a browser never asks again. Any
  other request (no ``v``, or the hash of an older file) gets ``no-cache`` and an ``ETag``,
  so it is revalidated (``304``) instead of served stale.
* gzip: text files (scripts, styles, JSON, SVG) over 1 KiB are compressed once, on their
  first request, and kept in memory with their hash; a client that accepts gzip gets those
  bytes (``Content-Encoding: gzip``, ``Vary: Accept-Encoding``). The 1.3 MB plotly.js
  bundle goes over the wire as ~0.45 MB.
* files: only regular files inside the static folder (``safe_join``, symlinks resolved);
  anything else is a 404. A file changed on disk (a development checkout) is read again:
  the cache is keyed by its size and modification time.

The cache is per app (:class:`Assets`, in ``app.extensions["tracker_assets"]``); it holds
each file's bytes once and its compressed bytes once: the folder is < 8 MB.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import NotFound
from werkzeug.security import safe_join

__all__ = ["IMMUTABLE", "Assets", "install"]

IMMUTABLE = "public, max-age=31536000, immutable"
GZIP_MIN_BYTES = 1024
MIMETYPES = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".png": "image/png",
    ".ico": "image/x-icon",
}
COMPRESSIBLE = frozenset({".js", ".css", ".json", ".svg", ".txt", ".md"})


@dataclass(frozen=True)
class Asset:
    """One static file as read: its bytes, their hash, and the gzip of them (or None)."""

    stamp: tuple[int, int]  # (size, mtime_ns) when read
    body: bytes
    digest: str  # sha256 hex, first 12 characters
    gzipped: bytes | None
    mimetype: str


class Assets:
    """The files of one static folder, hashed and compressed on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._cache: dict[str, Asset] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Asset:
        """The file ``name`` (a path inside the folder).

        Raises:
            NotFound (404): no regular file of that name inside the folder.
        """
        joined = safe_join(str(self.root), name)
        if joined is None:
            raise NotFound()
        path = Path(joined).resolve()
        if not path.is_relative_to(self.root) or not path.is_file():
            raise NotFound()
        stat = path.stat()
        stamp = (stat.st_size, stat.st_mtime_ns)
        cached = self._cache.get(name)
        if cached is not None and cached.stamp == stamp:
            return cached
        body = path.read_bytes()
        suffix = path.suffix.lower()
        gzipped = None
        if suffix in COMPRESSIBLE and len(body) >= GZIP_MIN_BYTES:
            gzipped = gzip.compress(body, compresslevel=9, mtime=0)
        asset = Asset(
            stamp=stamp,
            body=body,
            digest=hashlib.sha256(body).hexdigest()[:12],
            gzipped=gzipped,
            mimetype=MIMETYPES.get(suffix, "application/octet-stream"),
        )
        with self._lock:
            self._cache[name] = asset
        return asset

    def version(self, name: str) -> str | None:
        """The hash that goes in the file's URL; None when there is no such file."""
        try:
            return self.get(name).digest
        except NotFound:
            return None

    def response(self, name: str) -> Response:
        """The file for the current request: immutable when asked by its current hash,
        revalidated otherwise; gzipped when the client accepts it.

        Raises:
            NotFound (404): no such file.
        """
        asset = self.get(name)
        etag = f'"{asset.digest}"'
        response = Response(mimetype=asset.mimetype)
        response.headers["ETag"] = etag
        if request.args.get("v") == asset.digest:
            response.headers["Cache-Control"] = IMMUTABLE
        else:
            response.headers["Cache-Control"] = "no-cache"
        if asset.gzipped is not None:
            response.vary.add("Accept-Encoding")
        if etag in request.headers.get("If-None-Match", ""):
            response.status_code = 304
            return response
        if asset.gzipped is not None and request.accept_encodings.quality("gzip") > 0:
            response.set_data(asset.gzipped)
            response.headers["Content-Encoding"] = "gzip"
        else:
            response.set_data(asset.body)
        return response


def _serve(filename: str) -> Response:
    assets: Assets = current_app.extensions["tracker_assets"]
    return assets.response(filename)


def install(app: Flask) -> Assets:
    """Serve ``app``'s static folder through :class:`Assets` (the ``static`` endpoint keeps
    its name and URL rule) and add each file's hash to ``url_for("static", ...)``."""
    assets = Assets(Path(str(app.static_folder)))
    app.extensions["tracker_assets"] = assets
    app.view_functions["static"] = _serve

    @app.url_defaults
    def _hash_static_urls(endpoint: str | None, values: dict[str, Any]) -> None:
        if endpoint == "static" and "v" not in values and "filename" in values:
            digest = assets.version(str(values["filename"]))
            if digest is not None:
                values["v"] = digest

    return assets
