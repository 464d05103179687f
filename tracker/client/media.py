"""Media encoders: images, figures and histograms turned into artifact bytes.

Pure apart from reading a file the caller names: no store, no threads. The training thread
calls only the cheap ``prepare_*`` functions (shape checks, a copy of a numpy array, a
detach of a tensor); the encoder thread (:mod:`.encoder`) calls the returned
``Pending.build``, which converts, encodes and returns the artifacts to store
(:mod:`tracker.client.uploads`).

* Images: numpy arrays ``HW``, ``HWC``, ``CHW`` (C of 1, 3 or 4), a batch ``NCHW``/``NHWC``
  or a list of equal-shaped images laid out as a grid; floats are read as ``[0, 1]``
  (clipped, NaN as 0), integers as ``0..255`` (clipped); torch tensors (detached now,
  moved to the CPU and encoded in the encoder thread; one that requires grad is copied on its device
  now, and another tensor changed in place before it is encoded fails its entry rather
  than store the new values); PIL images; paths of image files (PNG and JPEG as they are).
  Arrays and tensors become PNG through the small zlib writer below (faster than Pillow's
  encoder, so numpy alone is enough); PIL images through Pillow. JPEG when asked
  (``format="jpeg"``) or, with Pillow, for photos of a megapixel or more without alpha.
* Figures: matplotlib (rendered to PNG *in the calling thread*: pyplot is not thread-safe
  and scripts close figures right after logging them) and plotly (``fig.to_json()``).
* Histograms: ``{"edges": [...], "counts": [...]}`` of the finite values, NaN and ±Inf
  counted apart (``nan``, ``posinf``, ``neginf``), computed in the encoder thread.
"""

from __future__ import annotations

import io
import json
import math
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from tracker.client.encoder import torch_op
from tracker.errors import InvalidInput

__all__ = [
    "Artifact",
    "Pending",
    "encode_png",
    "histogram",
    "image_grid",
    "prepare_figure",
    "prepare_histogram",
    "prepare_image",
    "to_hwc_uint8",
]

JPEG_MIN_PIXELS = 1024 * 1024  # a photo this large (and without alpha) goes as JPEG
JPEG_QUALITY = 90
GRID_PADDING = 2
MAX_BINS = 10_000
_IMAGE_SUFFIXES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}


@dataclass(frozen=True)
class Artifact:
    """One file to store: ``data`` in memory or a local file read when uploaded."""

    path: str
    data: bytes | Path
    media_type: str | None = None
    step: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    temporary: bool = False  # data is a file of ours (a spilled upload): deleted once stored

    @property
    def size(self) -> int:
        return len(self.data) if isinstance(self.data, bytes) else self.data.stat().st_size


@dataclass
class Pending:
    """What a ``log_*`` call queued: ``build()`` makes the artifacts, ahead of the writer in
    the encoder thread (:mod:`tracker.client.encoder`), which leaves them in ``built`` (or
    the error in ``failed``).

    ``nbytes`` is the memory the entry holds until it is stored (the media byte budget)."""

    what: str  # for messages: "image 'samples' at step 3"
    build: Callable[[], list[Artifact]]
    nbytes: int
    built: list[Artifact] | None = None
    failed: Exception | None = None
    claimed: bool = False  # the encoder took it (built or failed follow)


# ------------------------------------------------------------------------ images


def prepare_image(
    key: str, image: Any, step: int, caption: str | None, image_format: str | None
) -> Pending:
    """Check ``image`` and hold it (copied or detached) for the writer. Cheap."""
    fmt = None if image_format is None else _check_format(image_format)
    base = f"media/images/{key}/{step:09d}"
    meta: dict[str, Any] = {} if caption is None else {"caption": str(caption)}
    what = f"image {key!r} at step {step}"
    if _is_tensor(image):  # first: a training loop's usual image, and the cheapest to hold
        tensor = _detached(image)
        shape = tuple(tensor.shape)
        _layout(shape, what)
        nbytes = tensor.dtype.itemsize * math.prod(shape)
        if image.requires_grad:  # a parameter or a view of one, changed in place by the
            tensor = tensor.clone()  # optimizer (and .data has a version counter of its own)
        version = _version(tensor)
        build = partial(_build_tensor_image, tensor, version, base, step, meta, fmt)
        return Pending(what, build, nbytes)
    if isinstance(image, (str, Path)):
        return _prepare_image_file(Path(image), base, step, meta, f"{what} ({image})", fmt)
    if _is_pil(image):
        held = image.copy()
        size = held.width * held.height * len(held.getbands())
        return Pending(what, lambda: [_encode_pil(held, base, step, meta, fmt)], size)
    if isinstance(image, (list, tuple)) and image and not _is_number(image[0]):
        parts = [_hold_array(item, what) for item in image]
        shapes = {tuple(p.shape) for p in parts}
        if len(shapes) != 1:
            raise InvalidInput(f"{what}: a list of images must share one shape, got {shapes}")
        _layout(tuple(parts[0].shape), what)

        def build_list() -> list[Artifact]:
            import numpy as np

            arrays = [_tensor_to_numpy(p) if _is_tensor(p) else p for p in parts]
            grid = image_grid(np.stack([to_hwc_uint8(a) for a in arrays]))
            return [_encode_array(grid, base, step, meta, fmt)]

        return Pending(what, build_list, sum(_nbytes(p) for p in parts))
    array = _hold_array(image, what)
    _layout(tuple(array.shape), what)
    return Pending(what, partial(_build_array_image, array, base, step, meta, fmt), array.nbytes)


# Builders are module functions bound with ``partial`` (2 objects the garbage collector
# tracks, where a closure over six names is 8): what a call leaves queued decides how often
# a collection (~100 µs) runs inside a training loop's call (17 -> 10 in 1,000 calls).


def _build_tensor_image(
    tensor: Any, version: int | None, base: str, step: int, meta: dict[str, Any],
    fmt: str | None,
) -> list[Artifact]:  # fmt: skip
    return [_encode_array(_tensor_to_numpy(tensor, version), base, step, meta, fmt)]


def _build_array_image(
    array: Any, base: str, step: int, meta: dict[str, Any], fmt: str | None
) -> list[Artifact]:
    return [_encode_array(array, base, step, meta, fmt)]


def _hold_array(image: Any, what: str) -> Any:
    """A tensor detached, anything else as a numpy array copy (the caller may reuse it).

    The copy is ``tobytes()``, which keeps the GIL: a copy that releases it (``np.array``)
    lets a busy encoder or writer thread take the interpreter for up to a switch interval (5 ms)."""
    if _is_tensor(image):
        return _detached(image)
    try:
        import numpy as np
    except ImportError as exc:  # pragma: no cover - numpy is there wherever arrays are
        raise InvalidInput(f"{what}: logging arrays needs numpy") from exc
    array = image if type(image) is np.ndarray else np.asarray(image)
    if array.dtype == object or not (
        np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_
    ):
        raise InvalidInput(f"{what}: an image is an array of numbers, not {array.dtype}")
    return np.frombuffer(array.tobytes(), dtype=array.dtype).reshape(array.shape)


def _detached(tensor: Any) -> Any:
    """The tensor without its autograd graph. ``.data`` rather than ``detach()``: torch ops
    release the GIL, and getting it back from a busy encoder or writer thread can take
    milliseconds."""
    return tensor.data if tensor.requires_grad else tensor


def _version(tensor: Any) -> int | None:
    """The tensor's in-place change counter; None for an inference tensor (it has none)."""
    try:
        return int(tensor._version)
    except RuntimeError:
        return None


def _nbytes(value: Any) -> int:
    if _is_tensor(value):
        return int(value.dtype.itemsize * math.prod(value.shape))
    return int(value.nbytes)


def _layout(shape: tuple[int, ...], what: str) -> str:
    """``HW``, ``HWC``, ``CHW``, ``NCHW`` or ``NHWC`` for ``shape``, else InvalidInput."""
    channels = (1, 3, 4)
    if len(shape) == 2:
        layout = "HW"
    elif len(shape) == 3 and shape[-1] in channels:
        layout = "HWC"
    elif len(shape) == 3 and shape[0] in channels:
        layout = "CHW"
    elif len(shape) == 4 and shape[1] in channels:
        layout = "NCHW"
    elif len(shape) == 4 and shape[-1] in channels:
        layout = "NHWC"
    else:
        raise InvalidInput(
            f"{what}: shape {shape} is not an image: use HW, HWC or CHW (1, 3 or 4 "
            f"channels), or a batch NCHW/NHWC (laid out as a grid)"
        )
    if 0 in shape:
        raise InvalidInput(f"{what}: shape {shape} is empty")
    return layout


def to_hwc_uint8(array: Any) -> Any:
    """An ``HW``/``HWC``/``CHW`` or batch array as ``HxWxC`` uint8 (a batch as a grid)."""
    import numpy as np

    layout = _layout(tuple(array.shape), "image")
    if layout == "NCHW":
        array = np.transpose(array, (0, 2, 3, 1))
    if layout in ("NCHW", "NHWC"):
        return image_grid(to_uint8(array))
    if layout == "CHW":
        array = np.transpose(array, (1, 2, 0))
    elif layout == "HW":
        array = array[:, :, None]
    return to_uint8(array)


def to_uint8(array: Any) -> Any:
    """Floats in [0, 1] (clipped, NaN as 0) or integers in 0..255 (clipped) as uint8."""
    import numpy as np

    if array.dtype == np.uint8:
        return np.ascontiguousarray(array)
    if array.dtype == np.bool_:
        return array.astype(np.uint8) * 255
    if np.issubdtype(array.dtype, np.floating):
        scaled = np.nan_to_num(array.astype(np.float32, copy=False), nan=0.0) * 255.0
        return (np.clip(scaled, 0.0, 255.0) + 0.5).astype(np.uint8)
    return np.clip(array, 0, 255).astype(np.uint8)


def image_grid(batch: Any, padding: int = GRID_PADDING) -> Any:
    """``N x H x W x C`` uint8 images as one grid image, ``ceil(sqrt(N))`` per row."""
    import numpy as np

    n, h, w, c = batch.shape
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    grid = np.zeros(
        (rows * h + (rows + 1) * padding, cols * w + (cols + 1) * padding, c), dtype=np.uint8
    )
    for i in range(n):
        r, col = divmod(i, cols)
        top = padding + r * (h + padding)
        left = padding + col * (w + padding)
        grid[top : top + h, left : left + w] = batch[i]
    return grid


def _tensor_to_numpy(tensor: Any, version: int | None = None) -> Any:
    """In the encoder thread: to the CPU, floats as float32 (bfloat16 has no numpy type).

    Every call of a tensor's method is inside :func:`torch_op`: torch releases the GIL in
    most of them, even ``is_neg()``, and a daemon thread that takes it back while the
    interpreter exits aborts the process. A CPU tensor is then read outside the gate, as
    raw memory (:func:`_numpy_view`: no torch object); others are copied by torch inside
    it. ``version``: the tensor's ``_version`` when it was logged; an in-place change since
    (read after the copy, so a change during it counts too) fails the entry rather than
    storing what the tensor holds now. What is returned may be a view of ``tensor``'s
    memory: use it while ``tensor`` is held."""
    import numpy as np

    with torch_op():
        floating = tensor.dtype.is_floating_point
        view = _numpy_view(tensor)
    if view is not None:
        if floating and view.dtype != np.float32:
            array = view.astype(np.float32)
        elif version is not None:
            array = view.copy()
        else:
            array = view
    else:
        import torch

        with torch_op():  # the tensors made here are freed inside too: a copy leaves them
            cpu = tensor.to("cpu", torch.float32) if floating else tensor.cpu()
            array = cpu.resolve_neg().numpy().copy()
            del cpu
    if version is not None:
        with torch_op():
            changed = tensor._version != version
        if changed:
            raise InvalidInput(
                "the tensor was changed in place after it was logged, before it was encoded: "
                "log a copy (tensor.clone()) or call tracker.flush() before changing it"
            )
    return array


# torch dtypes whose memory numpy reads as is
_NUMPY_DTYPES = {
    "torch.float64": "float64", "torch.float32": "float32", "torch.float16": "float16",
    "torch.int64": "int64", "torch.int32": "int32", "torch.int16": "int16",
    "torch.int8": "int8", "torch.uint8": "uint8", "torch.bool": "bool",
}  # fmt: skip


def _numpy_view(tensor: Any) -> Any:
    """A CPU tensor's memory as a read-only numpy array that holds no torch object; None on
    a device, for a type numpy lacks (bfloat16, float8), a lazily negated or conjugated
    view, or a layout other than strided. Called inside :func:`torch_op` (it calls the
    tensor's methods); the array is then used outside it.

    Not ``tensor.numpy()``: that makes a second Python tensor, the array's base, and
    freeing it releases the GIL inside torch (``THPVariable_clear``). In the encoder thread
    that free came after the gate, when the array was dropped, and a process whose
    interpreter began to exit meanwhile aborted ("terminate called without an active
    exception"). Valid while ``tensor`` is: the array does not keep it alive."""
    import ctypes

    import numpy as np

    name = _NUMPY_DTYPES.get(str(tensor.dtype))
    if (
        name is None or tensor.device.type != "cpu" or str(tensor.layout) != "torch.strided"
        or tensor.is_neg() or tensor.is_conj()
    ):  # fmt: skip
        return None
    dtype = np.dtype(name)
    shape, strides = tuple(tensor.shape), tuple(tensor.stride())
    if tensor.numel() == 0:
        empty = np.empty(shape, dtype)
        empty.flags.writeable = False
        return empty
    span = 1 + sum((n - 1) * st for n, st in zip(shape, strides, strict=True))
    memory = (ctypes.c_char * (span * dtype.itemsize)).from_address(tensor.data_ptr())
    flat = np.frombuffer(memory, dtype=dtype, count=span)
    view = np.lib.stride_tricks.as_strided(
        flat, shape, tuple(st * dtype.itemsize for st in strides), writeable=False
    )
    return view


def _encode_array(
    array: Any, base: str, step: int, meta: dict[str, Any], fmt: str | None
) -> Artifact:
    hwc = to_hwc_uint8(array)
    height, width, channels = hwc.shape
    info = {**meta, "width": int(width), "height": int(height)}
    pil = _pil()
    photo = channels in (1, 3) and width * height >= JPEG_MIN_PIXELS
    if fmt == "png" or pil is None or (fmt is None and not photo):
        if fmt == "jpeg":
            raise InvalidInput("JPEG images need Pillow: pip install 'tracker[media]'")
        # our PNG writer, with or without Pillow: 2-3x less CPU than Pillow's (which tries
        # every filter on every row), files within ~10% of its size; CPU spent here
        # is CPU not left to the training loop when the machine is small
        return Artifact(f"{base}.png", encode_png(hwc), "image/png", step, info)
    mode = {1: "L", 3: "RGB", 4: "RGBA"}[channels]
    image = pil.fromarray(hwc[:, :, 0] if channels == 1 else hwc, mode)
    return _encode_pil(image, base, step, info, fmt)


def _encode_pil(
    image: Any, base: str, step: int, meta: dict[str, Any], fmt: str | None
) -> Artifact:
    if fmt is None:
        photo = image.mode in ("RGB", "L") and image.width * image.height >= JPEG_MIN_PIXELS
        fmt = "jpeg" if photo else "png"
    info = {**meta, "width": int(image.width), "height": int(image.height)}
    out = io.BytesIO()
    if fmt == "jpeg":
        if image.mode not in ("RGB", "L"):
            image = image.convert("RGB")
        image.save(out, format="JPEG", quality=JPEG_QUALITY)
        return Artifact(f"{base}.jpg", out.getvalue(), "image/jpeg", step, info)
    if image.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"):
        image = image.convert("RGBA")
    image.save(out, format="PNG", compress_level=1)
    return Artifact(f"{base}.png", out.getvalue(), "image/png", step, info)


def _prepare_image_file(
    path: Path, base: str, step: int, meta: dict[str, Any], what: str, fmt: str | None
) -> Pending:
    try:
        data = path.read_bytes()  # now: the script may overwrite the file next step
    except OSError as exc:
        raise InvalidInput(f"{what}: cannot read {path}: {exc.strerror or exc}") from exc
    suffix = path.suffix.lower()
    media_type = _IMAGE_SUFFIXES.get(suffix)
    if media_type is not None and (fmt is None or fmt == ("png" if suffix == ".png" else "jpeg")):
        ext = ".png" if suffix == ".png" else ".jpg"
        return Pending(
            what, lambda: [Artifact(base + ext, data, media_type, step, meta)], len(data)
        )

    def build() -> list[Artifact]:
        pil = _pil()
        if pil is None:
            raise InvalidInput(f"{what}: converting {path.name} needs Pillow: pip install "
                               f"'tracker[media]' (PNG and JPEG files need nothing)")  # fmt: skip
        with pil.open(io.BytesIO(data)) as image:
            image.load()
            return [_encode_pil(image, base, step, meta, fmt)]

    return Pending(what, build, len(data))


def _check_format(value: str | None) -> str | None:
    if value is None:
        return None
    fmt = str(value).lower()
    fmt = "jpeg" if fmt == "jpg" else fmt
    if fmt not in ("png", "jpeg"):
        raise InvalidInput(f"format={value!r}: use 'png' or 'jpeg'", field="format")
    return fmt


# ----------------------------------------------------------------------- PNG


def encode_png(hwc: Any) -> bytes:
    """``H x W x C`` uint8 (C of 1, 3 or 4) as PNG bytes, with zlib only (no Pillow).

    Every row but the first uses PNG's "Up" filter (the byte minus the one above, mod 256):
    one vectorised subtraction, and zlib at level 1 then compresses a photo or a rendered
    plot about as well as Pillow's per-row filter search, in a third of the time."""
    import numpy as np

    height, width, channels = hwc.shape
    color = {1: 0, 3: 2, 4: 6}[channels]
    rows = np.ascontiguousarray(hwc, dtype=np.uint8).reshape(height, width * channels)
    raw = np.empty((height, width * channels + 1), dtype=np.uint8)
    raw[0, 0] = 0  # filter None for the first row (nothing above it)
    raw[1:, 0] = 2  # filter Up
    raw[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=raw[1:, 1:])  # uint8 arithmetic wraps mod 256

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(body, zlib.crc32(kind)) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", header),
            chunk(b"IDAT", zlib.compress(raw.tobytes(), 1)),
            chunk(b"IEND", b""),
        ]
    )


# --------------------------------------------------------------------- figures


def prepare_figure(key: str, figure: Any, step: int) -> Pending:
    """A matplotlib figure (or axes) rendered to PNG now, a plotly figure as its JSON."""
    what = f"figure {key!r} at step {step}"
    base = f"media/figures/{key}/{step:09d}"
    module = type(figure).__module__ or ""
    if module.startswith("plotly") or hasattr(figure, "to_plotly_json"):
        text = figure.to_json() if hasattr(figure, "to_json") else json.dumps(
            figure.to_plotly_json()
        )  # fmt: skip
        data = text.encode("utf-8")
        art = Artifact(f"{base}.plotly.json", data, "application/json", step, {"kind": "plotly"})
        return Pending(what, lambda: [art], len(data))
    fig = figure.figure if hasattr(figure, "figure") and not hasattr(figure, "savefig") else figure
    if not hasattr(fig, "savefig"):
        raise InvalidInput(
            f"{what}: a {type(figure).__name__} is not a matplotlib or plotly figure"
        )
    out = io.BytesIO()
    fig.savefig(out, format="png", bbox_inches="tight")
    data = out.getvalue()
    width, height = struct.unpack(">II", data[16:24])
    meta = {"kind": "matplotlib", "width": width, "height": height}
    art = Artifact(f"{base}.png", data, "image/png", step, meta)
    return Pending(what, lambda: [art], len(data))


# ------------------------------------------------------------------ histograms


def prepare_histogram(key: str, values: Any, step: int, bins: int) -> Pending:
    """Hold ``values`` (a tensor copied on its device, else a numpy copy) for the writer."""
    what = f"histogram {key!r} at step {step}"
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_BINS:
        raise InvalidInput(f"{what}: bins={bins!r}: an int from 1 to {MAX_BINS}", field="bins")
    if _is_tensor(values) and values.device.type != "cpu":
        return prepare_device_histogram(key, values, step, bins)
    # a CPU tensor is copied: weights change in place at the next optimizer step
    held = values.detach().clone() if _is_tensor(values) else _hold_array(values, what)
    path = f"media/histograms/{key}/{step:09d}.json"
    return Pending(what, partial(_build_histogram, held, path, step, bins), _nbytes(held))


def _build_histogram(held: Any, path: str, step: int, bins: int) -> list[Artifact]:
    array = _tensor_to_numpy(held) if _is_tensor(held) else held
    doc = histogram(array, bins)
    meta = {k: doc[k] for k in ("bins", "count", "nan", "posinf", "neginf")}
    meta.update(min=doc["edges"][0] if doc["edges"] else None,
                max=doc["edges"][-1] if doc["edges"] else None)  # fmt: skip
    body = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    return [Artifact(path, body, "application/json", step, meta)]


def prepare_device_histogram(key: str, tensor: Any, step: int, bins: int) -> Pending:
    """A tensor's histogram reduced on its own device, with no sync: the calling thread
    only queues a few kernels (and the memory held is ``bins`` counts, not a copy of the
    tensor); the encoder thread reads the counts back. Same document as :func:`histogram`."""
    import torch

    with torch.no_grad():
        flat = tensor.detach().reshape(-1)
        flat = flat if flat.is_floating_point() else flat.float()
        finite = torch.isfinite(flat)
        inf = torch.tensor(math.inf, dtype=flat.dtype, device=flat.device)
        lo = torch.where(finite, flat, inf).min() if flat.numel() else inf
        hi = torch.where(finite, flat, -inf).max() if flat.numel() else -inf
        wide = torch.float64 if flat.dtype == torch.float64 else torch.float32
        flat32, lo32, hi32 = flat.to(wide), lo.to(wide), hi.to(wide)
        span = hi32 - lo32
        lo32 = torch.where(span > 0, lo32, lo32 - 0.5)
        hi32 = torch.where(span > 0, hi32, hi32 + 0.5)
        index = ((flat32 - lo32) / (hi32 - lo32) * bins).floor().clamp(0, bins - 1)
        index = torch.where(finite, index, torch.full_like(index, bins)).long()
        counts = torch.bincount(index, minlength=bins + 1)[:bins]
        stats = torch.stack(
            [
                finite.sum().float(),
                torch.isnan(flat).sum().float(),
                torch.isposinf(flat).sum().float(),
                torch.isneginf(flat).sum().float(),
                lo32,
                hi32,
            ]
        )
    total = flat.numel()
    path = f"media/histograms/{key}/{step:09d}.json"

    def build() -> list[Artifact]:
        import numpy as np

        with torch_op():  # the copies on the CPU are freed inside too
            stats_list, counts_list = stats.cpu().tolist(), counts.cpu().tolist()
        n_finite, nan, posinf, neginf, low, high = stats_list
        if n_finite:
            edges = [float(e) for e in np.linspace(low, high, bins + 1)]
            count_list = [int(c) for c in counts_list]
        else:
            edges, count_list = [], []
        doc = {
            "edges": edges,
            "counts": count_list,
            "bins": bins,
            "count": total,
            "nan": int(nan),
            "posinf": int(posinf),
            "neginf": int(neginf),
        }
        meta = {k: doc[k] for k in ("bins", "count", "nan", "posinf", "neginf")}
        meta.update(min=edges[0] if edges else None, max=edges[-1] if edges else None)
        body = json.dumps(doc, separators=(",", ":")).encode("utf-8")
        return [Artifact(path, body, "application/json", step, meta)]

    return Pending(f"histogram {key!r} at step {step}", build, 8 * (bins + 8))


def histogram(values: Any, bins: int) -> dict[str, Any]:
    """Counts and edges of the finite values; NaN, +Inf and -Inf counted apart."""
    import numpy as np

    flat = np.asarray(values).reshape(-1)
    if flat.dtype == np.bool_:
        flat = flat.astype(np.uint8)
    if np.issubdtype(flat.dtype, np.floating):
        nan = int(np.isnan(flat).sum())
        posinf = int(np.isposinf(flat).sum())
        neginf = int(np.isneginf(flat).sum())
        finite = flat[np.isfinite(flat)] if nan or posinf or neginf else flat
    else:
        nan = posinf = neginf = 0
        finite = flat
    if finite.size == 0:
        edges: list[float] = []
        counts: list[int] = []
    else:
        lo, hi = float(finite.min()), float(finite.max())
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        hist, edge_array = np.histogram(finite.astype(np.float64, copy=False), bins, (lo, hi))
        counts = [int(c) for c in hist]
        edges = [float(e) for e in edge_array]
    return {
        "edges": edges,
        "counts": counts,
        "bins": bins,
        "count": int(flat.size),
        "nan": nan,
        "posinf": posinf,
        "neginf": neginf,
    }


# ----------------------------------------------------------------------- helpers


def _is_tensor(value: Any) -> bool:
    kind = type(value)
    known = _TENSOR_TYPES.get(kind)
    if known is None:
        known = _TENSOR_TYPES[kind] = kind.__module__.startswith("torch") and hasattr(
            kind, "detach"
        )
    return known


_TENSOR_TYPES: dict[type, bool] = {}  # type -> is a torch tensor (the check, once per type)


def _is_pil(value: Any) -> bool:
    return type(value).__module__.startswith("PIL") and hasattr(value, "getbands")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float))


def _pil() -> Any:
    """``PIL.Image``, or None without Pillow (PNG through :func:`encode_png` then)."""
    try:
        from PIL import Image
    except ImportError:
        return None
    return Image
