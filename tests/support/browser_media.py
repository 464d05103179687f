"""Artifacts and media for the browser tests: files of every preview kind, image keys with
many steps, figures (plotly JSON and PNG) and histograms over steps, written through the
store's ``put_artifact`` at the paths the client uses (``media/<kind>/<key>/<step:09d>.<ext>``).

The images are PNGs made here (zlib + struct, no imaging library): step ``s`` of an image
key is ``16 + s`` pixels wide, so a test can tell from ``naturalWidth`` which step is shown.
"""

from __future__ import annotations

import json
import math
import random
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Put = Callable[..., Any]  # put(run_id, path, data, *, media_type=None, step=None, meta=None)

IMAGE_STEPS = 40  # steps of the "samples" image key
HIST_STEPS = 120  # steps of the weights histograms
MANY_STEPS = 2000  # steps of the "many" image key (one blob, deduplicated): one listing, one image
CSV_ROWS = 250  # more than the preview's 100


@dataclass
class SeededMedia:
    image_steps: list[int] = field(default_factory=list)
    hist_steps: list[int] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


def png(width: int, height: int, rgb: Callable[[int, int], tuple[int, int, int]]) -> bytes:
    """An 8-bit RGB PNG whose pixel (x, y) is ``rgb(x, y)``."""
    raw = b"".join(
        b"\x00" + bytes(c for x in range(width) for c in rgb(x, y)) for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + (chunk(b"IEND", b""))
    )


def sample(step: int) -> bytes:
    """A digit-like blob that grows sharper with the step; 16 + step pixels wide."""
    width, height = 16 + step, 32
    sharp = 1 + step / 8

    def rgb(x: int, y: int) -> tuple[int, int, int]:
        d = math.hypot((x - width / 2) / width, (y - height / 2) / height) * 4
        v = max(0, min(255, int(255 * math.exp(-(d**2) * sharp))))
        return (v, v // 2 + 40, 255 - v)

    return png(width, height, rgb)


def _histogram(rng: random.Random, center: float, spread: float, bins: int = 32) -> dict[str, Any]:
    values = [rng.gauss(center, spread) for _ in range(2000)]
    lo, hi = min(values), max(values)
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    return {"edges": [lo + i * width for i in range(bins + 1)], "counts": counts}


def _plotly_figure(step: int) -> dict[str, Any]:
    labels = [str(d) for d in range(5)]
    z = [
        [(20 + step if i == j else (i * 7 + j * 3 + step) % 5) for j in range(5)] for i in range(5)
    ]
    return {
        "data": [{"type": "heatmap", "z": z, "x": labels, "y": labels, "colorscale": "Blues"}],
        "layout": {"title": {"text": f"confusion matrix <b>step {step}</b>"},
                   "xaxis": {"title": {"text": "predicted"}}, "yaxis": {"title": {"text": "true"}}},
    }  # fmt: skip


# Names that must show as text: an <img onerror> in a file name or a caption is not markup.
HOSTILE = '<img src=x onerror="document.body.dataset.xss=1">'


def seed_media(put: Put, run_id: int, *, other_run: int | None = None) -> SeededMedia:
    """Files, images, figures and histograms for ``run_id``; histograms of another shape for
    ``other_run`` (Compare's side by side)."""
    out = SeededMedia()
    rng = random.Random(11)

    def add(path: str, data: bytes, **kw: Any) -> None:
        put(run_id, path, data, **kw)
        out.paths.append(path)

    add(
        "config.yaml", b"optimizer: adam\nlr: 0.0003\nmodel:\n  width: 64\n", media_type="text/yaml"
    )
    add("notes/README.txt", f"Trained on digits.\n{HOSTILE}\n".encode(), media_type="text/plain")
    metrics = {"val/acc": 0.96, "per_class": [0.97, 0.95, 0.96], "note": HOSTILE}
    add("eval/metrics.json", json.dumps(metrics).encode(), media_type="application/json")
    rows = ["id,label,predicted,confidence"] + [
        f'{i},{i % 10},{(i * 7) % 10},"{0.5 + (i % 50) / 100:.2f}"' for i in range(CSV_ROWS)
    ]
    add("eval/predictions.csv", ("\n".join(rows) + "\n").encode(), media_type="text/csv")
    add("eval/report.pdf", b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n",
        media_type="application/pdf")  # fmt: skip
    add("eval/confusion.png", sample(24), media_type="image/png")
    add("model/weights.bin", bytes(range(256)) * 64, media_type="application/octet-stream")
    add(f"notes/{HOSTILE}.txt", b"a file with a hostile name\n", media_type="text/plain")

    for step in range(0, IMAGE_STEPS * 5, 5):
        add(f"media/images/samples/{step:09d}.png", sample(step // 5), media_type="image/png",
            step=step, meta={"caption": f"step {step}: predicted {step % 10}"})  # fmt: skip
        out.image_steps.append(step)
    tiny = sample(1)
    for step in range(MANY_STEPS):
        put(run_id, f"media/images/many/{step:09d}.png", tiny, media_type="image/png", step=step)
    add(f"media/images/samples/val/{0:09d}.png", sample(3), media_type="image/png", step=0,
        meta={"caption": HOSTILE})  # fmt: skip
    for step in (100, 200):
        figure = json.dumps(_plotly_figure(step)).encode()
        path = f"media/figures/confusion/{step:09d}.plotly.json"
        add(path, figure, media_type="application/json", step=step)
    add(f"media/figures/loss_curve/{200:09d}.png", sample(10), media_type="image/png", step=200)
    for step in range(0, HIST_STEPS * 10, 10):
        t = step / (HIST_STEPS * 10)
        for key, center, spread in (
            ("weights/fc1", 0.0, 0.05 + 0.3 * t),
            ("grads/fc1", 0.0, 0.5 * (1 - t) + 0.01),
        ):
            data = json.dumps(_histogram(rng, center, spread)).encode()
            add(f"media/histograms/{key}/{step:09d}.json", data, media_type="application/json",
                step=step)  # fmt: skip
        out.hist_steps.append(step)
    if other_run is not None:
        for step in range(0, HIST_STEPS * 10, 10):
            t = step / (HIST_STEPS * 10)
            data = json.dumps(_histogram(rng, 0.2 * t, 0.05 + 0.05 * t)).encode()
            put(other_run, f"media/histograms/weights/fc1/{step:09d}.json", data,
                media_type="application/json", step=step)  # fmt: skip
    return out
