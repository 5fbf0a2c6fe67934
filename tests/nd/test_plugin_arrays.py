"""b2nd arrays with c-blosc2's NDLZ codec and NDCELL / NDMEAN filters, both ways.

python-blosc2 writes each array and b2store reads the same values, whole and in part (the
partial reads go block by block); b2store writes the same settings and python-blosc2 reads
them, the chunks byte-identical to its own where it is deterministic (no padding). The
writers refuse, before writing, what c-blosc2 fails on or cannot read back.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import far_match_block

import b2store

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the interop oracle")
Codec, Filter, SplitMode = blosc2.Codec, blosc2.Filter, blosc2.SplitMode


def _field(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 3, n) for n in shape], indexing="ij")
    x = sum(np.sin((k + 2) * g) for k, g in enumerate(grids)) * 40 + 100
    x = x + rng.normal(0, 0.5, shape)
    if np.dtype(dtype).kind in "iu":
        x = np.round(x)
    return x.astype(dtype)


def _b2store_kwargs(cparams):
    kw = {"codec": cparams.get("codec", Codec.ZSTD).value}
    filters = cparams.get("filters", [Filter.NOFILTER] * 5 + [Filter.SHUFFLE])
    kw["filters"] = [f.value for f in filters]
    kw["filters_meta"] = list(cparams.get("filters_meta", [0] * len(filters)))
    for key in ("codec_meta", "clevel"):
        if key in cparams:
            kw[key] = cparams[key]
    if "splitmode" in cparams:
        kw["splitmode"] = cparams["splitmode"].value
    return kw


def _padless(shape, chunks, blocks):
    if any(c % b for c, b in zip(chunks, blocks)):
        return []
    grid = [math.ceil(s / c) for s, c in zip(shape, chunks)]
    return [
        n
        for n, idx in enumerate(np.ndindex(*grid))
        if all((i + 1) * c <= s for i, c, s in zip(idx, chunks, shape))
    ]


CASES = [  # shape, dtype, chunks, blocks, python-blosc2 cparams
    ((64, 50), "u1", (32, 50), (16, 20), {"codec": Codec.NDLZ, "codec_meta": 4}),
    ((64, 50), "u1", (64, 50), (32, 25), {"codec": Codec.NDLZ, "codec_meta": 8}),
    ((90, 70), "u1", (45, 70), (45, 35), {"codec": Codec.NDLZ, "codec_meta": 4,
                                          "filters": [Filter.NOFILTER]}),
    ((60, 40), "f4", (30, 40), (16, 16), {"codec": Codec.NDLZ, "codec_meta": 4,
                                          "splitmode": SplitMode.ALWAYS_SPLIT}),
    ((60, 40), "i8", (30, 40), (16, 8), {"codec": Codec.NDLZ, "codec_meta": 8,
                                         "splitmode": SplitMode.ALWAYS_SPLIT}),
    ((200,), "f8", (100,), (30,), {"filters": [Filter.NDCELL], "filters_meta": [4]}),
    ((40, 30), "i2", (20, 30), (10, 11), {"filters": [Filter.NDCELL, Filter.SHUFFLE],
                                          "filters_meta": [3, 0]}),
    ((12, 10, 9), "f4", (12, 10, 9), (8, 4, 5), {"codec": Codec.LZ4,
                                                 "filters": [Filter.NDCELL],
                                                 "filters_meta": [2]}),
    ((6, 8, 10, 12), "u1", (6, 8, 10, 12), (3, 4, 5, 6), {"filters": [Filter.NDCELL],
                                                          "filters_meta": [3]}),
    ((64, 48), "f4", (32, 48), (16, 16), {"filters": [Filter.NDMEAN], "filters_meta": [4]}),
    ((50, 30), "f8", (25, 30), (10, 11), {"codec": Codec.LZ4, "filters": [Filter.NDMEAN],
                                          "filters_meta": [3]}),
    ((12, 10, 9), "f4", (12, 10, 9), (8, 4, 5), {"filters": [Filter.NDMEAN, Filter.SHUFFLE],
                                                 "filters_meta": [4, 0]}),
    ((13, 13), "i4", (13, 13), (8, 8), {"filters": [Filter.NDMEAN], "filters_meta": [4]}),
]  # fmt: skip


def _id(case):
    shape, dtype, _, blocks, cp = case
    what = cp.get("codec", Codec.ZSTD).name
    if "filters" in cp and cp["filters"][0] != Filter.NOFILTER:
        what = cp["filters"][0].name
    return f"{what}-{dtype}-{len(shape)}d-{'x'.join(map(str, blocks))}"


@pytest.mark.parametrize("shape,dtype,chunks,blocks,cparams", CASES, ids=map(_id, CASES))
def test_both_ways(tmp_path, shape, dtype, chunks, blocks, cparams):
    data = _field(shape, dtype)
    theirs_path = tmp_path / "theirs.b2nd"
    theirs = blosc2.asarray(
        data, chunks=chunks, blocks=blocks, urlpath=str(theirs_path), mode="w",
        cparams=dict(cparams, nthreads=1),
    )  # fmt: skip
    want = theirs[...]
    lossless = not any(f == Filter.NDMEAN for f in cparams.get("filters", []))
    assert np.array_equal(want, data) == lossless
    with b2store.open(theirs_path) as arr:
        assert np.array_equal(arr[...], want, equal_nan=True)
        for key in (
            tuple(slice(1, None, 3) for _ in shape),
            tuple(n // 2 for n in shape),
            tuple(slice(n // 3, n // 3 + 2) for n in shape),
        ):
            assert np.array_equal(arr[key], want[key], equal_nan=True), key

    mine_path = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine_path, chunks=chunks, blocks=blocks, **_b2store_kwargs(cparams))
    mine = blosc2.open(str(mine_path), mode="r")
    with b2store.open(mine_path) as arr:
        assert np.array_equal(mine[...], arr[...], equal_nan=True)
    for n in _padless(shape, chunks, blocks):
        assert mine.schunk.get_chunk(n) == theirs.schunk.get_chunk(n), f"chunk {n}"
    if _padless(shape, chunks, blocks) and all(s % c == 0 for s, c in zip(shape, chunks)):
        assert np.array_equal(mine[...], want, equal_nan=True)


def test_ndlz_of_wide_items_needs_split_streams(tmp_path):
    # NDLZ codes one byte an item; c-blosc2 fails the chunk unless each byte of the items
    # is its own stream.
    with pytest.raises(ValueError, match="splitmode='always'"):
        b2store.asarray(_field((32, 32), "f4"), tmp_path / "x.b2nd", codec="ndlz", codec_meta=4)
    assert not (tmp_path / "x.b2nd").exists()


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"codec": "ndlz", "codec_meta": 5}, "codec_meta 4 or 8"),
        ({"filters": ["ndmean"], "filters_meta": [4], "blocks": (2, 10)}, "cannot decode"),
        ({"filters": ["ndcell"], "filters_meta": [4], "blocks": (3, 3)}, "larger than"),
        ({"filters": ["ndcell"], "filters_meta": [0]}, "cell side"),
    ],
)
def test_settings_c_blosc2_fails_on_are_refused_before_writing(tmp_path, kw, match):
    kw = {"chunks": (8, 10), "blocks": (8, 10), **kw}
    with pytest.raises(ValueError, match=match):
        b2store.asarray(_field((8, 10), "u1" if "codec" in kw else "f4"), tmp_path / "x", **kw)
    assert not (tmp_path / "x").exists()


def test_ndmean_of_ints_averages_their_bits_as_floats_as_c_blosc2_does(tmp_path):
    # c-blosc2 looks only at the item size: python-blosc2's own test writes int32 this way.
    data = np.arange(64, dtype="i4").reshape(8, 8)
    b2store.asarray(data, tmp_path / "m.b2nd", chunks=(8, 8), blocks=(8, 8),
                    filters=["ndmean"], filters_meta=[4])  # fmt: skip
    cells = data.view("f4").reshape(2, 4, 2, 4).mean(axis=(1, 3), dtype="f4")
    with b2store.open(tmp_path / "m.b2nd") as arr:
        got = arr[...].view("f4")
    assert np.array_equal(got[::4, ::4], cells)


def test_a_plugin_chunk_read_through_zarr_and_xarray(tmp_path):
    xr = pytest.importorskip("xarray")
    import zarr

    from b2store.integrations.zarr.store import B2ndStore

    data = _field((64, 50), "f4")
    blosc2.asarray(data, chunks=(32, 50), blocks=(16, 25), urlpath=str(tmp_path / "v.b2nd"),
                   cparams={"filters": [Filter.NDMEAN], "filters_meta": [4]})  # fmt: skip
    want = blosc2.open(str(tmp_path / "v.b2nd"))[...]
    z = zarr.open_array(B2ndStore(tmp_path / "v.b2nd"), mode="r")
    assert np.array_equal(z[...], want)
    assert np.array_equal(z[5:9, 3:30], want[5:9, 3:30])
    with xr.open_dataset(tmp_path / "v.b2nd", engine="b2nd", chunks={}) as ds:
        (name,) = ds.data_vars
        assert np.array_equal(ds[name].values, want)


def test_ndlz_never_writes_a_stream_python_blosc2_misreads(tmp_path):
    misread_by_theirs = 0
    for fillers in range(6, 11):
        x = far_match_block(fillers, fillers)
        theirs = blosc2.asarray(x, chunks=x.shape, blocks=x.shape, cparams={
            "codec": Codec.NDLZ, "codec_meta": 4, "filters": [Filter.NOFILTER]})  # fmt: skip
        misread_by_theirs += not np.array_equal(theirs[...], x)
        with b2store.open(theirs.schunk.to_cframe()) as arr:
            assert np.array_equal(arr[...], theirs[...])  # read as python-blosc2 reads it
        path = tmp_path / f"mine{fillers}.b2nd"
        b2store.asarray(x, path, chunks=x.shape, blocks=x.shape, codec="ndlz", codec_meta=4,
                        filters=[])  # fmt: skip
        assert np.array_equal(blosc2.open(str(path))[...], x)
    assert misread_by_theirs  # the case is real: python-blosc2's own writes come back wrong


@pytest.mark.parametrize(
    "kw", [{"codec": "ndlz", "codec_meta": 4}, {"filters": ["ndcell"], "filters_meta": [4]}]
)
def test_a_bare_chunk_with_a_short_last_block_is_the_callers_error(kw):
    # 70 bytes in blocks of 8x8: the last block is 6 bytes, which c-blosc2 fails on too.
    with pytest.raises(ValueError, match="not 6"):
        b2store.encode_chunk(np.arange(70, dtype="u1"), blockshape=(8, 8), **kw)


@pytest.mark.parametrize("how", ["pickle", "copy", "deepcopy", "schunk"])
def test_copies_and_pickles_of_a_plugin_array_read_it(tmp_path, how):
    # A copy reopens the frame from its recipe: the block shape the plugins need goes along.
    import copy
    import pickle

    data = _field((40, 30), "f4")
    path = tmp_path / "m.b2nd"
    b2store.asarray(data, path, chunks=(20, 30), blocks=(10, 10),
                    filters=["ndcell", "shuffle"], filters_meta=[4, 0]).close()  # fmt: skip
    with b2store.open(path) as arr:
        if how == "schunk":
            again = pickle.loads(pickle.dumps(arr.schunk))
            assert np.array_equal(again.decompress_chunk(1), arr.schunk.decompress_chunk(1))
            again.close()
            return
        other = {
            "pickle": lambda a: pickle.loads(pickle.dumps(a)),
            "copy": copy.copy,
            "deepcopy": copy.deepcopy,
        }[how](arr)
        assert np.array_equal(other[3], data[3]) and np.array_equal(other[...], data)
