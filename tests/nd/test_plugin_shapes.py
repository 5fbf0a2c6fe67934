"""Default chunk and block shapes with c-blosc2's plugins, on any machine's caches.

python-blosc2 picks its blocks from the CPU's caches, whatever the codec: on some caches its
blocks are ones ZFP, NDCELL or NDMEAN cannot code (a block side of 3 for ZFP), and the same
call then works on one machine and fails on another. b2store keeps python-blosc2's choice
wherever the plugins code it, and cuts other blocks where it does not. The caches are
faked here (b2store's and python-blosc2's alike), and which blocks the plugins code is
stated apart from b2store's checks (``helpers.plugin_blocks_fit``) and shown by
python-blosc2 reading b2store's arrays.
"""

from __future__ import annotations

import platform

import numpy as np
import pytest
from helpers import plugin_blocks_fit

import b2store
from b2store.nd import shapes
from b2store.nd.shapes import default_chunks_blocks

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the reference")

KiB, MiB = 1 << 10, 1 << 20

# (system, machine, l1, l2, l3): the block floor is a quarter of L2 on x86_64 (4 x L1 from
# 2 MiB of L2), L1 elsewhere.
MACHINES = [
    ("Linux", "x86_64", 32 * KiB, 256 * KiB, 8 * MiB),
    ("Linux", "x86_64", 32 * KiB, 512 * KiB, 16 * MiB),
    ("Linux", "x86_64", 48 * KiB, 768 * KiB, 32 * MiB),  # the (3, 90, 180) of issue 35
    ("Linux", "x86_64", 48 * KiB, 1 * MiB, 32 * MiB),
    ("Linux", "x86_64", 48 * KiB, 1280 * KiB, 24 * MiB),
    ("Linux", "x86_64", 48 * KiB, 2 * MiB, 30 * MiB),
    ("Linux", "aarch64", 64 * KiB, 1 * MiB, 32 * MiB),
    ("Darwin", "arm64", 128 * KiB, 12 * MiB, 1 * MiB),
]
MACHINE_IDS = [f"{m[1]}-L1={m[2] // KiB}K-L2={m[3] // KiB}K" for m in MACHINES]

# b2store's keywords; python-blosc2's CParams follow from them (_cparams).
SETTINGS = {
    "zfp_acc": {"codec": "zfp_acc", "codec_meta": 254},
    "zfp_prec": {"codec": "zfp_prec", "codec_meta": 12},
    "zfp_rate": {"codec": "zfp_rate", "codec_meta": 25},
    "ndlz": {"codec": "ndlz", "codec_meta": 4, "splitmode": "always"},
    "ndcell": {"codec": "lz4", "filters": ["ndcell"], "filters_meta": [40]},
    "ndcell-shuffled": {"codec": "zstd", "filters": ["shuffle", "ndcell"], "filters_meta": [0, 4]},
    "ndmean": {"codec": "zstd", "filters": ["ndmean"], "filters_meta": [8]},
    "ndmean-zfp": {"codec": "zfp_rate", "codec_meta": 30, "filters": ["ndmean"],
                   "filters_meta": [16]},
}  # fmt: skip

SHAPES = [
    (12, 30, 360),
    (60, 90, 180),
    (3, 1000),
    (120, 360),
    (1000, 1000),
    (7, 999_983),
    (10**6,),
    (2, 50, 50, 50),
    (5, 6, 7, 8),
    (2, 3),
    (0, 5),
]


def _fake(monkeypatch, machine) -> None:
    """This machine's type and caches, for b2store and python-blosc2 alike."""
    system, arch, l1, l2, l3 = machine
    monkeypatch.setattr(platform, "system", lambda: system)
    monkeypatch.setattr(platform, "machine", lambda: arch)
    monkeypatch.setattr(shapes, "_detected_cache_sizes", lambda: (l1, l2, l3))
    for key, value in zip(("l1_data_cache_size", "l2_cache_size", "l3_cache_size"), (l1, l2, l3)):
        monkeypatch.setitem(blosc2.cpu_info, key, value)


def _cparams(kw: dict, clevel: int) -> dict:
    filters = [blosc2.Filter[f.upper()] for f in kw.get("filters", ["shuffle"])]
    return {
        "codec": blosc2.Codec[kw["codec"].upper()],
        "codec_meta": kw.get("codec_meta", 0),
        "clevel": clevel,
        "filters": filters,
        "filters_meta": list(kw.get("filters_meta", [0] * len(filters))),
        "splitmode": blosc2.SplitMode[kw.get("splitmode", "auto").upper() + "_SPLIT"],
    }


def _fits(kw: dict, itemsize: int, blocks) -> bool:
    return plugin_blocks_fit(
        blocks,
        itemsize,
        kw["codec"],
        kw.get("codec_meta", 0),
        kw.get("filters", ()),
        kw.get("filters_meta", ()),
    )


def _no_block_fits(kw: dict, shape) -> bool:
    """No ZFP block under a side of 4, no NDLZ block but a 2-d one, no NDCELL cell of more
    items than the array has: the writers refuse those (tested below)."""
    if kw["codec"].startswith("zfp") and min(shape) < 4:
        return True
    if kw["codec"] == "ndlz" and len(shape) != 2:
        return True
    cells = [m for f, m in zip(kw.get("filters", ()), kw.get("filters_meta", ())) if f == "ndcell"]
    return any(c ** len(shape) > np.prod(shape) for c in cells)


@pytest.mark.parametrize("machine", MACHINES, ids=MACHINE_IDS)
def test_python_blosc2s_blocks_where_they_fit_blocks_that_fit_elsewhere(monkeypatch, machine):
    _fake(monkeypatch, machine)
    cut = 0
    for name, kw in SETTINGS.items():
        for shape in SHAPES:
            for itemsize in (4, 8):
                for clevel in (1, 5, 9):
                    theirs = blosc2.compute_chunks_blocks(
                        shape, dtype=np.dtype(f"V{itemsize}"), cparams=_cparams(kw, clevel)
                    )
                    ours = default_chunks_blocks(shape, itemsize, clevel=clevel, **kw)
                    case = (name, shape, itemsize, clevel, theirs, ours)
                    if _fits(kw, itemsize, theirs[1]):
                        assert ours == theirs, case
                        continue
                    if 0 not in shape and _no_block_fits(kw, shape):
                        assert ours == theirs, case
                        continue
                    cut += 1
                    assert _fits(kw, itemsize, ours[1]), case
                    # Inside the array, the chunks whole blocks as python-blosc2 makes them.
                    assert all(b <= c <= s for b, c, s in zip(ours[1], ours[0], shape)), case
                    assert all(c % b == 0 or c == s for c, b, s in zip(*ours, shape)), case
                    # Of python-blosc2's size or so, but where NDCELL needs a cell's items
                    # or NDMEAN, its first side short of the cell, single cells elsewhere.
                    size = np.prod(ours[1], dtype=float) / np.prod(theirs[1], dtype=float)
                    if "ndcell" not in kw.get("filters", ()):
                        assert size <= 2, case
                    mean = dict(zip(kw.get("filters", ()), kw.get("filters_meta", ())))
                    if shape[0] >= mean.get("ndmean", 0):
                        assert size >= 0.5, case
    # Every one of these caches makes python-blosc2 pick blocks some plugin cannot code.
    assert cut > 0


@pytest.mark.parametrize("machine", MACHINES[:4], ids=MACHINE_IDS[:4])
@pytest.mark.parametrize("name", list(SETTINGS))
def test_writers_with_default_shapes_on_any_caches(tmp_path, monkeypatch, machine, name):
    kw = SETTINGS[name]
    _fake(monkeypatch, machine)
    shape = (120, 360) if kw["codec"] == "ndlz" else (12, 30, 360)
    grids = np.meshgrid(*[np.linspace(0, 3, n) for n in shape], indexing="ij")
    data = (sum(np.sin((k + 2) * g) for k, g in enumerate(grids)) * 40 + 100).astype("f4")
    if kw["codec"] == "ndlz":
        data = data.astype("u2")

    path = tmp_path / "a.b2nd"
    with b2store.asarray(data, path, **kw) as arr:
        assert _fits(kw, data.itemsize, arr.blocks), arr.blocks
        ours = arr[...]
    np.testing.assert_array_equal(blosc2.open(str(path))[...], ours)
    if not kw["codec"].startswith("zfp") and "ndmean" not in kw.get("filters", ()):
        np.testing.assert_array_equal(ours, data)  # the lossless ones

    with b2store.zeros(shape, data.dtype, tmp_path / "z.b2nd", **kw) as arr:
        arr[2:9] = data[2:9]
        part = arr[...]
    np.testing.assert_array_equal(blosc2.open(str(tmp_path / "z.b2nd"))[...], part)

    import xarray as xr

    ds = xr.Dataset({"v": (("a", "b", "c")[-data.ndim :], data)})
    # (clevel 5 as asarray's: to_b2nd's own default is 1, and the blocks, so the values a
    # lossy codec keeps, follow the level)
    b2store.to_b2nd(ds, tmp_path / "x.b2nd", encoding={"v": {"clevel": 5, **kw}})
    with xr.open_dataset(tmp_path / "x.b2nd", engine="b2nd") as back:
        np.testing.assert_array_equal(back.v.values, ours)


def test_the_issue_35_example_python_blosc2_fails_where_b2store_writes(tmp_path, monkeypatch):
    # L2 = 768 KiB: python-blosc2 picks (3, 90, 180) for ZFP_ACC and fails to write it.
    _fake(monkeypatch, MACHINES[2])
    t2m = np.random.default_rng(0).normal(280, 1, (60, 90, 180)).astype("f4")
    cparams = {"codec": blosc2.Codec.ZFP_ACC, "codec_meta": 254, "filters": []}
    assert blosc2.compute_chunks_blocks(t2m.shape, dtype=t2m.dtype, cparams=cparams) == (
        (60, 90, 180),
        (3, 90, 180),
    )
    with pytest.raises(RuntimeError, match="Error while creating the NDArray"):
        blosc2.asarray(t2m, cparams=cparams)
    with b2store.asarray(t2m, tmp_path / "t.b2nd", codec="zfp_acc", codec_meta=254) as arr:
        assert (arr.chunks, arr.blocks) == ((60, 90, 180), (6, 45, 180))
        ours = arr[...]
    assert np.abs(ours - t2m).max() <= 1e-2
    np.testing.assert_array_equal(blosc2.open(str(tmp_path / "t.b2nd"))[...], ours)


@pytest.mark.parametrize(
    ("shape", "kw", "message"),
    [
        (
            (2, 100),
            SETTINGS["zfp_acc"],
            r"ZFP_ACC needs blocks of 1 to 4 dimensions, each at least 4 long, not \(2, 100\)",
        ),
        (
            (3, 300),
            SETTINGS["ndcell"],
            r"NDCELL with filters_meta 40 on blocks \(3, 300\) of 4-byte items: NDCELL: a "
            r"cell of 40\*\*2 items is larger than the block \(900 items\)",
        ),
    ],
)
def test_no_block_fits_the_writer_says_why(tmp_path, shape, kw, message):
    with pytest.raises(ValueError, match=message):
        b2store.zeros(shape, "f4", tmp_path / "a.b2nd", **kw)
    assert not (tmp_path / "a.b2nd").exists()


@pytest.mark.parametrize("name", ["zfp_acc", "ndlz", "ndcell", "ndmean"])
def test_empty_arrays_are_written_as_python_blosc2_writes_them(tmp_path, name):
    kw = SETTINGS[name]
    dtype = "u1" if name == "ndlz" else "f4"
    for shape in [(0, 5), (5, 0)]:
        with b2store.zeros(shape, dtype, tmp_path / "e.b2nd", mode="w", **kw) as arr:
            assert (arr.chunks, arr.blocks) == (shape, shape)
        assert blosc2.open(str(tmp_path / "e.b2nd"))[...].shape == shape


@pytest.mark.parametrize("name", ["plain", *SETTINGS])
def test_a_chunks_block_size_names_its_default_blocks_on_every_machine(monkeypatch, name):
    """Readers without the blocks (the Zarr b2nd codec without a blockshape) take them from
    the chunk's block size: every machine's default is found again from its size alone, so
    no two machines' defaults of one size differ in shape."""
    kw = {"codec": "zstd"} if name == "plain" else SETTINGS[name]
    found = 0
    for shape in SHAPES:
        if 0 in shape or _no_block_fits(kw, shape):
            continue
        chunks = shape if np.prod(shape) <= 1 << 22 else shape[:-1] + (shape[-1] // 16,)
        for itemsize in (4, 8):
            by_size: dict[int, tuple] = {}
            for machine in MACHINES:
                _fake(monkeypatch, machine)
                blocks = default_chunks_blocks(shape, itemsize, chunks=chunks, **kw)[1]
                nbytes = int(np.prod(blocks)) * itemsize
                assert by_size.setdefault(nbytes, blocks) == blocks
                assert shapes.blocks_of_blocksize(chunks, itemsize, nbytes, **kw) == blocks
                found += 1
            # A size no default has is no shape at all (the reader refuses it).
            odd = int(np.prod(chunks)) * itemsize + itemsize
            assert shapes.blocks_of_blocksize(chunks, itemsize, odd, **kw) is None
    assert found
