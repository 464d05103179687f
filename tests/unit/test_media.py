"""Media encoders (tracker/client/media.py): every image input kind, grids, the zlib PNG
writer without Pillow, figures, histograms; files/text/dicts (tracker/client/files.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from tracker.client import media
from tracker.client.files import check_artifact_path, prepare_dict, prepare_files, prepare_text
from tracker.client.media import Artifact, encode_png, histogram, prepare_image
from tracker.errors import InvalidInput


def _one(pending: media.Pending) -> Artifact:
    (art,) = pending.build()
    return art


def _decode(art: Artifact) -> np.ndarray:
    assert isinstance(art.data, bytes)
    with Image.open(io.BytesIO(art.data)) as image:
        return np.asarray(image)


RGB = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (RGB, RGB),  # HWC uint8
        (np.transpose(RGB, (2, 0, 1)), RGB),  # CHW
        (RGB[:, :, 0], RGB[:, :, 0]),  # HW gray
        (RGB.astype(np.float32) / 255.0, RGB),  # floats in [0, 1]
        (torch.from_numpy(np.transpose(RGB, (2, 0, 1)).copy()).float() / 255.0, RGB),
        (torch.from_numpy(RGB.copy()), RGB),  # HWC uint8 tensor
        ([RGB], None),  # a list: a batch of one, as a grid
    ],
    ids=["hwc", "chw", "hw", "float", "tensor-chw-float", "tensor-hwc-u8", "list"],
)
def test_image_kinds_round_trip(given: Any, expected: np.ndarray | None) -> None:
    art = _one(prepare_image("samples", given, 7, "a cat", None))
    assert art.path == "media/images/samples/000000007.png"
    assert art.media_type == "image/png"
    assert art.step == 7
    decoded = _decode(art)
    assert (art.meta["width"], art.meta["height"]) == (decoded.shape[1], decoded.shape[0])
    if expected is None:  # a one-image grid: the image inside its padding
        expected = RGB
        pad = media.GRID_PADDING
        decoded = decoded[pad:-pad, pad:-pad]
    assert np.array_equal(decoded, expected)
    assert art.meta["caption"] == "a cat"


def test_float_images_are_clipped_and_nan_is_black() -> None:
    values = np.array([[-1.0, 0.0, 0.5, 1.0, 2.0, np.nan]], dtype=np.float64)
    art = _one(prepare_image("x", values, 0, None, None))
    assert _decode(art).tolist() == [[0, 0, 128, 255, 255, 0]]


def test_the_array_is_copied_at_call_time_and_a_tensor_is_not() -> None:
    array = np.zeros((2, 2), dtype=np.uint8)
    pending = prepare_image("x", array, 0, None, None)
    array[:] = 255  # the script reuses its buffer
    assert _decode(_one(pending)).max() == 0


def test_a_batch_becomes_a_grid() -> None:
    batch = np.stack([np.full((3, 4, 4), i * 20, dtype=np.uint8) for i in range(5)])  # NCHW
    art = _one(prepare_image("grid", batch, 1, None, None))
    grid = _decode(art)
    pad = media.GRID_PADDING
    # 5 images: 3 per row, 2 rows
    assert grid.shape == (2 * 4 + 3 * pad, 3 * 4 + 4 * pad, 3)
    for i in range(5):
        r, c = divmod(i, 3)
        top, left = pad + r * (4 + pad), pad + c * (4 + pad)
        assert (grid[top : top + 4, left : left + 4] == i * 20).all()
    assert grid[0, 0].tolist() == [0, 0, 0]  # padding


def test_nhwc_tensor_batch_is_a_grid_too() -> None:
    batch = torch.rand(4, 6, 6, 1)
    art = _one(prepare_image("g", batch, 0, None, None))
    assert _decode(art).shape == (2 * 6 + 3 * media.GRID_PADDING,) * 2


def test_pil_images_and_files(tmp_path: Path) -> None:
    pil = Image.fromarray(RGB)
    assert np.array_equal(_decode(_one(prepare_image("p", pil, 0, None, None))), RGB)
    png = tmp_path / "a.png"
    pil.save(png)
    art = _one(prepare_image("f", png, 3, None, None))
    assert art.data == png.read_bytes()  # stored as it is
    assert art.path.endswith("000000003.png")
    jpg = tmp_path / "b.jpeg"
    pil.save(jpg)
    art = _one(prepare_image("f", str(jpg), 3, None, None))
    assert (art.path, art.media_type) == ("media/images/f/000000003.jpg", "image/jpeg")
    bmp = tmp_path / "c.bmp"
    pil.save(bmp)
    art = _one(prepare_image("f", bmp, 3, None, None))  # converted to PNG
    assert art.media_type == "image/png" and np.array_equal(_decode(art), RGB)


def test_jpeg_when_asked_and_for_large_photos() -> None:
    art = _one(prepare_image("j", RGB, 0, None, "jpg"))
    assert art.path.endswith(".jpg") and art.media_type == "image/jpeg"
    photo = np.random.default_rng(0).integers(0, 255, (1024, 1024, 3), dtype=np.uint8)
    assert _one(prepare_image("big", photo, 0, None, None)).path.endswith(".jpg")
    with_alpha = np.zeros((1024, 1024, 4), dtype=np.uint8)
    assert _one(prepare_image("big", with_alpha, 0, None, None)).path.endswith(".png")


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (np.zeros((2, 3, 5, 7, 9)), "is not an image"),
        (np.zeros((5, 6, 7)), "is not an image"),
        (np.zeros((0, 3)), "empty"),
        (np.array([["a"]]), "array of numbers"),
    ],
)
def test_bad_images_are_refused_in_the_call(bad: Any, words: str) -> None:
    with pytest.raises(InvalidInput, match=words):
        prepare_image("x", bad, 0, None, None)


def test_bad_format_is_refused() -> None:
    with pytest.raises(InvalidInput, match="format='gif'"):
        prepare_image("x", RGB, 0, None, "gif")


@pytest.mark.parametrize("shape", [(3, 4, 1), (3, 4, 3), (3, 4, 4)])
def test_zlib_png_writer_matches_pillow_decoding(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    image = rng.integers(0, 255, shape, dtype=np.uint8)
    with Image.open(io.BytesIO(encode_png(image))) as decoded:
        pixels = np.asarray(decoded)
    assert np.array_equal(pixels.reshape(shape), image)


@settings(max_examples=60, deadline=None)
@given(
    height=st.integers(1, 9), width=st.integers(1, 9), channels=st.sampled_from([1, 3, 4]),
    seed=st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_up_filtered_png_decodes_to_the_same_pixels(
    height: int, width: int, channels: int, seed: int
) -> None:
    # the Up filter wraps mod 256 (0 under 255 and 255 under 0 included): Pillow decodes it
    rng = np.random.default_rng(seed)
    image = rng.choice(np.array([0, 1, 127, 128, 254, 255], dtype=np.uint8),
                       (height, width, channels))  # fmt: skip
    with Image.open(io.BytesIO(encode_png(image))) as decoded:
        pixels = np.asarray(decoded)
    assert np.array_equal(pixels.reshape(image.shape), image)


def test_png_writer_compresses_a_smooth_image_like_pillow() -> None:
    y, x = np.mgrid[0:256, 0:256]
    noise = np.random.default_rng(0).integers(0, 8, (256, 256, 3))
    image = (np.stack([x, y, (x + y) // 2], -1) + noise).astype(np.uint8)
    ours = encode_png(image)
    out = io.BytesIO()
    Image.fromarray(image).save(out, format="PNG", compress_level=1)
    assert len(ours) <= 1.15 * len(out.getvalue())  # unfiltered, it was 1.63x
    assert _one(prepare_image("x", image, 0, None, None)).data == ours  # used with Pillow too


def test_without_pillow_png_comes_from_the_zlib_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(media, "_pil", lambda: None)
    art = _one(prepare_image("x", RGB, 0, None, None))
    assert isinstance(art.data, bytes) and art.data == encode_png(RGB)
    with pytest.raises(InvalidInput, match="Pillow"):
        _one(prepare_image("x", RGB, 0, None, "jpeg"))


def test_histogram_counts_edges_and_non_finite() -> None:
    values = np.array([0.0, 1.0, 1.0, 2.0, np.nan, np.inf, -np.inf, np.inf])
    doc = histogram(values, 2)
    assert doc["edges"] == [0.0, 1.0, 2.0]
    assert doc["counts"] == [1, 3]
    assert (doc["nan"], doc["posinf"], doc["neginf"], doc["count"]) == (1, 2, 1, 8)
    assert histogram(np.full(3, 5.0), 4)["edges"] == [4.5, 4.75, 5.0, 5.25, 5.5]
    assert histogram(np.array([np.nan]), 4)["counts"] == []


def test_histogram_of_a_tensor_is_a_copy_taken_at_call_time() -> None:
    weights = torch.zeros(100)
    pending = media.prepare_histogram("w", weights, 5, 10)
    weights += 1.0  # the optimizer steps before the writer gets to it
    (art,) = pending.build()
    assert art.path == "media/histograms/w/000000005.json"
    assert isinstance(art.data, bytes)
    doc = json.loads(art.data)
    assert sum(doc["counts"]) == 100 and doc["edges"][0] == -0.5
    assert art.meta["bins"] == 10 and art.meta["nan"] == 0


@pytest.mark.parametrize("bins", [0, -1, 2.5, True, 10_001])
def test_histogram_bins_are_checked(bins: Any) -> None:
    with pytest.raises(InvalidInput, match="bins="):
        media.prepare_histogram("w", [1.0], 0, bins)


def test_matplotlib_figure_is_png_and_plotly_is_json() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2), dpi=50)
    ax.plot([0, 1], [1, 0])
    art = _one(media.prepare_figure("loss_curve", fig, 4))
    plt.close(fig)
    assert art.path == "media/figures/loss_curve/000000004.png"
    assert _decode(art).ndim == 3 and art.meta["kind"] == "matplotlib"
    art = _one(media.prepare_figure("axes", ax, 4))  # an Axes: its figure
    assert art.media_type == "image/png"

    class PlotlyLike:  # the duck type prepare_figure reads: plotly's to_json()
        def to_plotly_json(self) -> dict[str, Any]:
            return {"data": [{"type": "bar", "y": [1, 2]}], "layout": {}}

        def to_json(self) -> str:
            return json.dumps(self.to_plotly_json())

    art = _one(media.prepare_figure("bars", PlotlyLike(), 2))
    assert art.path == "media/figures/bars/000000002.plotly.json"
    assert isinstance(art.data, bytes) and json.loads(art.data)["data"][0]["type"] == "bar"
    with pytest.raises(InvalidInput, match="not a matplotlib or plotly figure"):
        media.prepare_figure("x", object(), 0)


def test_real_plotly_figure_if_installed() -> None:
    go = pytest.importorskip("plotly.graph_objects")
    fig = go.Figure(go.Scatter(y=[3, 1, 2]))
    art = _one(media.prepare_figure("p", fig, 0))
    assert isinstance(art.data, bytes) and json.loads(art.data)["data"][0]["y"] == [3, 1, 2]


def test_text_and_dicts_json_and_yaml() -> None:
    art = _one(prepare_text("notes/summary.md", "héllo"))
    assert (art.data, art.media_type) == ("héllo".encode(), "text/markdown")
    assert _one(prepare_text("notes/log", "x")).media_type == "text/plain"
    obj = {"lr": np.float32(0.5), "layers": (1, 2), "nested": {"t": torch.tensor([1.0])},
           "bad": float("nan")}  # fmt: skip
    art = _one(prepare_dict("config.json", obj))
    assert art.media_type == "application/json" and isinstance(art.data, bytes)
    expected = {"lr": 0.5, "layers": [1, 2], "nested": {"t": [1.0]}, "bad": "NaN"}
    assert json.loads(art.data) == expected
    art = _one(prepare_dict("config.yaml", obj))
    assert art.media_type == "application/yaml" and isinstance(art.data, bytes)
    assert yaml.safe_load(art.data) == expected
    with pytest.raises(InvalidInput, match="cannot be written as JSON"):
        prepare_dict("x.json", {"f": object()})


@pytest.mark.parametrize("bad", ["", "/abs", "a/../b", "a\\b", "a\x00", "a//b", "x" * 1025])
def test_artifact_paths_are_checked(bad: str) -> None:
    with pytest.raises(InvalidInput):
        check_artifact_path(bad)


def test_files_and_directories(tmp_path: Path) -> None:
    (tmp_path / "out" / "sub").mkdir(parents=True)
    (tmp_path / "out" / "a.txt").write_text("A")
    (tmp_path / "out" / "sub" / "b.csv").write_text("x,y\n1,2\n")
    entries = prepare_files(tmp_path / "out", None)
    arts = [a for e in entries for a in e.build()]
    assert [a.path for a in arts] == ["out/a.txt", "out/sub/b.csv"]
    assert arts[1].data == b"x,y\n1,2\n" and arts[1].media_type == "text/csv"
    arts = [a for e in prepare_files(tmp_path / "out", "results/v1") for a in e.build()]
    assert [a.path for a in arts] == ["results/v1/a.txt", "results/v1/sub/b.csv"]
    (art,) = prepare_files(tmp_path / "out" / "a.txt", "renamed.txt")[0].build()
    assert art.path == "renamed.txt"
    with pytest.raises(InvalidInput, match="neither a file nor a directory"):
        prepare_files(tmp_path / "missing", None)


@pytest.mark.parametrize(
    "values",
    [
        torch.arange(100.0),
        torch.tensor([0.0, 1.0, 1.0, 2.0, float("nan"), float("inf"), -float("inf")]),
        torch.full((7,), 3.0),
        torch.tensor([float("nan"), float("inf")]),
        torch.randn(1000, dtype=torch.float64),
        torch.arange(10),  # integers
    ],
    ids=["arange", "non-finite", "constant", "no-finite", "float64", "int"],
)
def test_device_histogram_matches_the_writer_side_one(values: torch.Tensor) -> None:
    # the no-sync reduction used for GPU tensors, run here on the CPU
    (art,) = media.prepare_device_histogram("w", values, 2, 8).build()
    assert isinstance(art.data, bytes)
    doc = json.loads(art.data)
    expected = histogram(values.numpy(), 8)
    assert doc["counts"] == expected["counts"]
    span = (expected["edges"][-1] - expected["edges"][0]) if expected["edges"] else 1.0
    assert doc["edges"] == pytest.approx(expected["edges"], rel=1e-6, abs=1e-6 * span)
    for field in ("nan", "posinf", "neginf", "count", "bins"):
        assert doc[field] == expected[field], field


@pytest.mark.parametrize(
    "tensor",
    [
        torch.rand(3, 4, 5),
        torch.rand(3, 4, 5, dtype=torch.float64),
        torch.rand(3, 4, 5).half(),
        torch.rand(3, 4, 5).bfloat16(),  # no numpy type: converted by torch
        torch.rand(4, 5, 3).permute(2, 0, 1),  # strided
        torch.randint(0, 255, (4, 5, 3), dtype=torch.uint8),
        torch.rand(3, 4, 5).neg()._neg_view(),  # a lazily negated view: numpy refuses it
    ],
    ids=["f32", "f64", "f16", "bf16", "strided", "u8", "neg-view"],
)
def test_tensors_reach_numpy_as_float32_or_their_integer_type(tensor: torch.Tensor) -> None:
    # CPU tensors go through numpy (no torch op in the encoder thread), others through torch
    array = media._tensor_to_numpy(tensor, tensor._version)
    want = tensor.resolve_neg().to(torch.float32) if tensor.is_floating_point() else tensor
    assert array.dtype == want.numpy().dtype
    assert np.array_equal(array, want.numpy())
    assert array.ctypes.data != tensor.data_ptr()  # a copy: the version is checked after it


NUMPY_DTYPES = [torch.float64, torch.float32, torch.float16, torch.int64, torch.int32,
                torch.int16, torch.int8, torch.uint8, torch.bool]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    dtype=st.sampled_from(NUMPY_DTYPES),
    shape=st.lists(st.integers(0, 5), min_size=0, max_size=4),
    order=st.randoms(use_true_random=False),
    step=st.integers(1, 3),
)
def test_the_encoder_view_of_a_cpu_tensor_reads_what_numpy_reads(
    dtype: torch.dtype, shape: list[int], order: Any, step: int
) -> None:
    # any strided layout (permuted, sliced with a step, expanded, offset into its storage)
    base = (torch.arange(max(1, int(np.prod(shape))) * step + 3) % 7 - 3).to(dtype)
    tensor = base[3:][::step][: int(np.prod(shape))].reshape(shape) if shape else base[3]
    dims = list(range(tensor.dim()))
    order.shuffle(dims)
    tensor = tensor.permute(dims)
    if tensor.dim() and tensor.shape[0] == 1:
        tensor = tensor.expand(3, *tensor.shape[1:])  # a stride of 0
    view = media._numpy_view(tensor)
    assert view is not None and not view.flags.writeable
    assert view.dtype == tensor.numpy().dtype and np.array_equal(view, tensor.numpy())
    assert not isinstance(view.base, torch.Tensor)  # no torch object: freed with no GIL dance


def test_the_encoder_view_is_none_where_torch_must_convert() -> None:
    assert media._numpy_view(torch.rand(3, dtype=torch.bfloat16)) is None
    assert media._numpy_view(torch.rand(3)._neg_view()) is None
    assert media._numpy_view(torch.rand(3, dtype=torch.complex64).conj()) is None
    assert media._numpy_view(torch.eye(3).to_sparse()) is None
