"""c-blosc2's ZFP plugin codecs (ZFP_ACC, ZFP_PREC, ZFP_RATE), read and written through zfpy.

python-blosc2 writes each array; b2store must read the same values, bit for bit (NaN as NaN),
and the arrays b2store writes must read in python-blosc2 as its own encoding of the same data
does, chunk for chunk byte-identical where python-blosc2 is itself deterministic (chunks
with no padding: python-blosc2 leaves an edge chunk's padding unset, and ZFP codes it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import blosc2_file_with_chunk, restream

import b2store
from b2store.chunk import zfp
from b2store.chunk.plugins import plugin_decoder
from b2store.chunk.zfp import zfp_mode
from b2store.constants import Codec as B2Codec

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the interop oracle")
pytest.importorskip("zfpy", reason="ZFP needs the zfp extra (zfpy)")

Codec, Filter, SplitMode = blosc2.Codec, blosc2.Filter, blosc2.SplitMode

# codec, meta, dtype, shape, chunks, blocks, cparams beyond codec and meta
CASES = [
    ("ZFP_ACC", 253, "f8", (40, 50), (20, 25), (16, 20), {}),  # error 10**-3
    ("ZFP_ACC", 0, "f4", (40, 50, 7), (20, 25, 7), (16, 20, 4), {}),
    ("ZFP_ACC", 37, "f8", (100, 1230), (50, 615), (25, 41), {"splitmode": SplitMode.ALWAYS_SPLIT}),
    ("ZFP_PREC", 20, "f4", (12, 10, 9), (12, 10, 9), (8, 4, 5), {}),
    ("ZFP_PREC", 37, "f8", (23, 34), (23, 34), (8, 8), {}),
    ("ZFP_PREC", 10, "f8", (12, 10, 9, 8), (12, 10, 9, 8), (8, 4, 5, 4), {}),
    ("ZFP_RATE", 37, "f4", (12, 10, 9, 7), (6, 10, 9, 7), (4, 5, 4, 6), {}),
    ("ZFP_RATE", 50, "f8", (1000,), (300,), (100,), {}),
    ("ZFP_RATE", 1, "f8", (100, 80), (50, 40), (16, 16), {"filters": [Filter.NOFILTER]}),
    ("ZFP_RATE", 37, "f4", (80, 51, 60), (40, 51, 60), (8, 17, 20),
     {"splitmode": SplitMode.ALWAYS_SPLIT}),
    ("ZFP_ACC", 250, "f4", (64, 64), (32, 32), (32, 32), {"filters": [Filter.NOFILTER]}),
]  # fmt: skip


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=shape), axis=-1).astype(dtype)


def _blosc2_cparams(codec, meta, extra):
    return {"codec": getattr(Codec, codec), "codec_meta": meta, **extra}


def _b2store_kwargs(codec, meta, extra):
    kw = {"codec": codec.lower(), "codec_meta": meta}
    # python-blosc2's default filters (SHUFFLE, in the last slot) stay with ZFP; b2store's
    # are none. NOFILTER slots are kept: they are the header's bytes.
    default = [Filter.NOFILTER] * 5 + [Filter.SHUFFLE]
    kw["filters"] = [f.value for f in extra.get("filters", default)]
    if "splitmode" in extra:
        kw["splitmode"] = extra["splitmode"].value
    return kw


def _same(a, b) -> bool:
    return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def _interior_chunks(shape, chunks, blocks):
    """Numbers of chunks with no padding (whole chunk inside the shape, whole blocks)."""
    if any(c % b for c, b in zip(chunks, blocks)):
        return []
    grid = [math.ceil(s / c) for s, c in zip(shape, chunks)]
    out = []
    for n, idx in enumerate(np.ndindex(*grid)):
        if all((i + 1) * c <= s for i, c, s in zip(idx, chunks, shape)):
            out.append(n)
    return out


@pytest.mark.parametrize("codec,meta,dtype,shape,chunks,blocks,extra", CASES)
def test_reads_what_python_blosc2_writes(
    tmp_path, codec, meta, dtype, shape, chunks, blocks, extra
):
    data = _data(shape, dtype)
    path = tmp_path / "theirs.b2nd"
    theirs = blosc2.asarray(
        data, chunks=chunks, blocks=blocks, urlpath=str(path), mode="w",
        cparams=_blosc2_cparams(codec, meta, extra),
    )  # fmt: skip
    want = theirs[...]
    with b2store.open(path) as arr:
        assert _same(arr[...], want)
        step = tuple(slice(1, None, 3) for _ in shape)
        assert _same(arr[step], want[step])
        corner = tuple(n - 1 for n in shape)
        assert _same(np.asarray(arr[corner]), np.asarray(want[corner]))
    # Lossy, and by as much as the mode says, where ZFP sees the floats (python-blosc2's
    # default SHUFFLE hands it their bytes regrouped, and the error is then unbounded).
    if codec == "ZFP_ACC" and extra.get("filters") == [Filter.NOFILTER]:
        assert not np.array_equal(want, data)
        assert np.abs(want - data).max() <= 10.0 ** (meta - 256 if meta > 127 else meta)


@pytest.mark.parametrize("codec,meta,dtype,shape,chunks,blocks,extra", CASES)
def test_python_blosc2_reads_what_b2store_writes(
    tmp_path, codec, meta, dtype, shape, chunks, blocks, extra
):
    data = _data(shape, dtype, seed=1)
    mine = tmp_path / "mine.b2nd"
    b2store.asarray(
        data, mine, chunks=chunks, blocks=blocks, **_b2store_kwargs(codec, meta, extra)
    ).close()
    theirs = blosc2.asarray(
        data, chunks=chunks, blocks=blocks, urlpath=str(tmp_path / "theirs.b2nd"), mode="w",
        cparams=_blosc2_cparams(codec, meta, extra),
    )  # fmt: skip
    read = blosc2.open(str(mine), mode="r")
    assert read.schunk.cparams.codec == getattr(Codec, codec)
    assert read.schunk.cparams.codec_meta == meta
    assert _same(read[...], theirs[...])
    interior = _interior_chunks(shape, chunks, blocks)
    for n in interior:
        assert read.schunk.get_chunk(n) == theirs.schunk.get_chunk(n), f"chunk {n}"
    with b2store.open(mine) as arr:
        assert _same(arr[...], theirs[...])


def test_zfp_rate_below_the_floor_is_raised_to_it():
    # 1 % of a float64's bits is 0.64 bits a value; zfp codes no cell in fewer than its
    # exponent and sign (12 bits over 16 values in 2-d), and c-blosc2 lets zfp raise it.
    assert zfp_mode(B2Codec.ZFP_RATE, 1, 8, 2) == {"rate": 12 / 16}
    assert zfp_mode(B2Codec.ZFP_RATE, 50, 4, 1) == {"rate": 16.0}
    assert zfp_mode(B2Codec.ZFP_PREC, 200, 8, 3) == {"precision": 64}
    assert zfp_mode(B2Codec.ZFP_ACC, 253, 8, 2) == {"tolerance": 10.0**-3}


def test_a_zfp_chunk_without_its_block_shape_is_refused_by_name(tmp_path):
    data = _data((32, 32), "f8")
    theirs = blosc2.asarray(data, chunks=(32, 32), blocks=(16, 16), cparams={
        "codec": Codec.ZFP_PREC, "codec_meta": 20})  # fmt: skip
    chunk = theirs.schunk.get_chunk(0)
    with pytest.raises(b2store.UnsupportedError, match=r"ZFP_PREC \(id 34\).*block shape"):
        b2store.decode_chunk(chunk)
    got = b2store.decode_chunk(chunk, blockshape=(16, 16))
    assert got.nbytes == 32 * 32 * 8
    with pytest.raises(b2store.UnsupportedError, match=r"'zfp_acc' for bare chunks.*b2nd"):
        b2store.encode_chunk(data, codec="zfp_acc")


def test_encode_chunk_with_blockshape_is_python_blosc2s_chunk():
    # One whole chunk of four blocks, laid out block after block as a b2nd chunk holds them.
    data = _data((32, 32), "f4")
    theirs = blosc2.asarray(data, chunks=(32, 32), blocks=(16, 16), cparams={
        "codec": Codec.ZFP_RATE, "codec_meta": 40, "filters": [Filter.NOFILTER]})  # fmt: skip
    blocks = data.reshape(2, 16, 2, 16).transpose(0, 2, 1, 3).copy()
    mine = b2store.encode_chunk(
        blocks, codec="zfp_rate", codec_meta=40, filters=[], blockshape=(16, 16)
    )
    assert mine == theirs.schunk.get_chunk(0)


@pytest.mark.parametrize("dtype", ["i2", "f2", "u1"])
def test_zfp_refuses_items_that_are_not_float32_or_float64(tmp_path, dtype):
    # c-blosc2 looks at the item size only (4 or 8), as b2store does.
    with pytest.raises(ValueError, match="float32 or float64"):
        b2store.asarray(np.zeros((8, 8), dtype), tmp_path / "x.b2nd", codec="zfp_acc")
    assert not (tmp_path / "x.b2nd").exists()


def test_zfp_refuses_blocks_smaller_than_its_cells(tmp_path):
    with pytest.raises(ValueError, match="at least 4 long"):
        b2store.asarray(
            _data((8, 8), "f8"), tmp_path / "x.b2nd", chunks=(8, 8), blocks=(2, 8),
            codec="zfp_acc",
        )  # fmt: skip


def _zfp_chunk():
    data = _data((32, 32), "f8")
    theirs = blosc2.asarray(data, chunks=(32, 32), blocks=(32, 32), cparams={
        "codec": Codec.ZFP_ACC, "codec_meta": 250, "filters": [Filter.NOFILTER]})  # fmt: skip
    return bytearray(theirs.schunk.get_chunk(0))


def test_hostile_zfp_streams_raise_format_error_or_decode_to_the_block():
    """zfp reads its stream without bounds; a cut or scrambled stream must never be read
    past its end (a crash, or another buffer's bytes), only give an error or some block."""
    chunk = _zfp_chunk()
    nbytes = 32 * 32 * 8
    rng = np.random.default_rng(7)
    start = int.from_bytes(chunk[32:36], "little")
    for trial in range(300):
        bad = bytearray(chunk)
        if trial % 3 == 0:  # the stream cut short (csize and cbytes say so)
            keep = int(rng.integers(1, len(bad) - start - 4))
            bad = bad[: start + 4 + keep]
            bad[start : start + 4] = keep.to_bytes(4, "little")
            bad[12:16] = len(bad).to_bytes(4, "little")
        else:  # random bytes over the stream
            for _ in range(int(rng.integers(1, 40))):
                bad[int(rng.integers(start + 4, len(bad)))] = int(rng.integers(256))
        try:
            out = b2store.decode_chunk(bytes(bad), blockshape=(32, 32))
        except b2store.FormatError:
            continue
        assert out.nbytes == nbytes


def test_without_zfpy_the_error_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "zfpy", None)  # import zfpy now fails
    chunk = bytes(_zfp_chunk())
    with pytest.raises(b2store.UnsupportedError, match=r"zfpy.*b2store\[zfp\]"):
        b2store.decode_chunk(chunk, blockshape=(32, 32))


def test_b2stores_zfp_default_is_no_filter_and_keeps_the_bound(tmp_path):
    # python-blosc2 keeps SHUFFLE before ZFP unless told otherwise, and ZFP then codes the
    # floats' bytes regrouped: its error bound no longer holds. b2store runs no filter.
    data = _data((64, 64), "f8")
    b2store.asarray(data, tmp_path / "mine.b2nd", codec="zfp_acc", codec_meta=253).close()
    read = blosc2.open(str(tmp_path / "mine.b2nd"), mode="r")
    assert list(read.schunk.cparams.filters) == [Filter.NOFILTER] * 6
    assert np.abs(read[...] - data).max() <= 1e-3
    theirs = blosc2.asarray(data, cparams={"codec": Codec.ZFP_ACC, "codec_meta": 253})
    assert np.abs(theirs[...] - data).max() > 1.0  # python-blosc2's default, for contrast


def test_xarray_opens_a_zfp_file_python_blosc2_wrote(tmp_path):
    xr = pytest.importorskip("xarray")
    data = _data((24, 30, 40), "f4")
    path = tmp_path / "t2m.b2nd"
    blosc2.asarray(data, chunks=(8, 30, 40), blocks=(4, 15, 20), urlpath=str(path), mode="w",
                   cparams={"codec": Codec.ZFP_ACC, "codec_meta": 254,
                            "filters": [Filter.NOFILTER]})  # fmt: skip
    want = blosc2.open(str(path))[...]
    with xr.open_dataset(path, engine="b2nd") as ds:
        (name,) = ds.data_vars
        assert np.array_equal(ds[name].values, want)
        assert ds[name].encoding["codec"] == "zfp_acc"
    with xr.open_dataset(path, engine="b2nd", chunks={}) as ds:
        (name,) = ds.data_vars
        assert np.array_equal(ds[name].isel({ds[name].dims[0]: slice(3, 17)}).values, want[3:17])
        assert float(ds[name].mean()) == pytest.approx(float(want.mean(dtype="f8")), rel=1e-6)


def test_the_b2nd_codecs_take_zfp_by_name(tmp_path):
    import numcodecs
    import zarr

    from b2store.integrations.zarr.b2nd import B2ndCodec

    data = _data((40, 30), "f8")
    # numcodecs: the b2nd codec's configuration names the plugin and its meta byte.
    codec = numcodecs.get_codec({"id": "b2nd", "chunkshape": [40, 30], "blockshape": [8, 10],
                                 "dtype": "<f8", "cname": "zfp_acc", "codec_meta": 253,
                                 "filters": []})  # fmt: skip
    assert codec.get_config()["cname"] == "zfp_acc" and codec.get_config()["codec_meta"] == 253
    chunk = codec.encode(data)
    back = codec.decode(chunk).reshape(data.shape)
    assert 0 < np.abs(back - data).max() <= 1e-3
    # The chunk is a b2nd chunk python-blosc2 writes the same way.
    theirs = blosc2.asarray(data, chunks=(40, 30), blocks=(8, 10), cparams={
        "codec": Codec.ZFP_ACC, "codec_meta": 253, "filters": [Filter.NOFILTER]})  # fmt: skip
    assert bytes(chunk) == theirs.schunk.get_chunk(0)
    # Zarr v3: the b2nd array-to-bytes codec, through its dict form.
    spec = B2ndCodec(blockshape=(8, 10), cname="zfp_rate", codec_meta=50, filters=()).to_dict()
    assert spec["configuration"]["codec_meta"] == 50
    z = zarr.create_array(tmp_path / "z.zarr", shape=data.shape, chunks=(16, 30), dtype="f8",
                          serializer=spec, compressors=None)  # fmt: skip
    z[...] = data
    again = zarr.open_array(tmp_path / "z.zarr", mode="r")
    assert again.metadata.codecs[0].cname == "zfp_rate"
    # python-blosc2's chunks and its reading of them are the oracle, not b2store's own.
    theirs = blosc2.asarray(data[:32], chunks=(16, 30), blocks=(8, 10), cparams={
        "codec": Codec.ZFP_RATE, "codec_meta": 50, "filters": [Filter.NOFILTER]})  # fmt: skip
    assert (tmp_path / "z.zarr" / "c" / "1" / "0").read_bytes() == theirs.schunk.get_chunk(1)
    assert np.array_equal(again[:32], theirs[...])
    assert 0 < np.abs(again[...] - data).max() < 1e-3


SWEEP = (
    [("ZFP_ACC", m) for m in (*range(236, 256, 2), *range(0, 10, 3), 127, 128)]
    + [("ZFP_PREC", m) for m in (0, 1, 2, 5, 9, 14, 20, 27, 35, 44, 53, 60, 64, 255)]
    + [("ZFP_RATE", m) for m in (1, 2, 5, 10, 17, 25, 33, 50, 67, 80, 99, 100, 150, 255)]
)


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("codec,meta", SWEEP)
def test_every_kind_of_meta_value_both_ways(codec, meta, dtype):
    """Meta values across each mode's range (int8 exponents both sides of 0 for ZFP_ACC,
    precisions past 64, rates past 100 %): read as python-blosc2 reads, written as it
    writes, one interior chunk of 2-d blocks."""
    data = _data((16, 24), dtype, seed=meta)
    if codec == "ZFP_RATE" and meta > 100:
        # More bits than the item has: every stream is stored raw. python-blosc2 cannot be
        # the oracle here: c-blosc2 sizes its ZFP_RATE buffer for zfp's default maximum,
        # and writes past it (valgrind: invalid writes; the oldest-release run aborted).
        mine = b2store.asarray(
            data, chunks=(16, 24), blocks=(8, 12), codec="zfp_rate", codec_meta=meta, filters=[]
        )
        read = blosc2.ndarray_from_cframe(mine.schunk.to_cframe())
        assert np.array_equal(read[...], data) and np.array_equal(mine[...], data)
        return
    cparams = {"codec": getattr(Codec, codec), "codec_meta": meta, "filters": [Filter.NOFILTER]}
    theirs = blosc2.asarray(data, chunks=(16, 24), blocks=(8, 12), cparams=cparams)
    with b2store.open(theirs.schunk.to_cframe()) as arr:
        assert _same(arr[...], theirs[...])
    mine = b2store.asarray(
        data, chunks=(16, 24), blocks=(8, 12), codec=codec.lower(), codec_meta=meta, filters=[]
    )
    assert mine.schunk.get_chunk(0) == theirs.schunk.get_chunk(0)


# --- a stream zfp does not read exactly is refused, never padded (issue 35) ------------------
# zfp reads past its stream's end without bounds and has no checksum: a stream shorter than
# its mode needs decodes into other values. Its size is the check: a fixed-rate stream's is
# known beforehand, the others' is what zfp's decoder consumed. python-blosc2 refuses only
# ZFP_RATE streams shorter than the rate needs, and reads the others' damage as values.


def _zfp_file(tmp_path, codec, meta):
    path = tmp_path / "theirs.b2nd"
    theirs = blosc2.asarray(_data((40, 100), "f8"), chunks=(40, 100), blocks=(20, 100),
                            urlpath=str(path), mode="w", cparams={
                                "codec": getattr(Codec, codec), "codec_meta": meta,
                                "filters": [Filter.NOFILTER], "nthreads": 1})  # fmt: skip
    return path, theirs[...], theirs.schunk.get_chunk(0)


def _meta(byte: int):
    return lambda chunk: chunk[:23] + bytes([byte]) + chunk[24:]


def _theirs(path) -> np.ndarray | None:
    try:
        return blosc2.open(str(path))[...]
    except RuntimeError:
        return None


RATE_DAMAGE = {
    # c-blosc2 3.3.5 compares a ZFP_RATE stream's size with the rate's need (the issue's
    # two cases), not bytes after it, nor a rate byte lowered.
    "rate byte raised": (_meta(100), "refused", 0, 16000, 8000),
    "rate byte lowered": (_meta(25), "other values", 0, 4000, 8000),
    "stream 64 bytes short": (lambda c: restream(c, 1, lambda s: s[:-64]), "refused", 1, 8000,
                              7936),
    "8 bytes after the stream": (lambda c: restream(c, 1, lambda s: s + bytes(8)), "the same",
                                 1, 8000, 8008),
}  # fmt: skip


@pytest.mark.parametrize("damage", RATE_DAMAGE)
def test_a_zfp_rate_stream_of_any_other_size_than_its_rate_is_refused(tmp_path, damage):
    change, theirs_read, block, want_size, found = RATE_DAMAGE[damage]
    path, want, chunk = _zfp_file(tmp_path, "ZFP_RATE", 50)
    bad = change(chunk)
    blosc2_file_with_chunk(path, 0, bad)
    got = _theirs(path)
    outcome = "refused" if got is None else "the same" if _same(got, want) else "other values"
    assert outcome == theirs_read
    meta = bad[23]
    with b2store.open(path) as arr, pytest.raises(b2store.FormatError, match=(
        rf"ZFP_RATE stream of block {block} of chunk 0 at offset \d+: expected {want_size} "
        rf"bytes \(every ZFP_RATE stream of a \(20, 100\) block at codec_meta {meta}\), "
        rf"found {found} bytes"
    )):  # fmt: skip
        arr[...]


def test_another_codecs_chunk_relabelled_as_zfp_rate_is_refused(tmp_path):
    path, _, chunk = _zfp_file(tmp_path, "ZFP_RATE", 50)
    _, _, acc = _zfp_file(tmp_path / "..", "ZFP_ACC", 253)
    relabelled = acc[:22] + bytes([35, 50]) + acc[24:]
    blosc2_file_with_chunk(path, 0, relabelled)
    assert _theirs(path) is None  # shorter than the rate needs: python-blosc2 refuses too
    with (
        b2store.open(path) as arr,
        pytest.raises(
            b2store.FormatError,
            match=r"ZFP_RATE stream of block 0 of chunk 0 .*expected 8000 bytes",
        ),
    ):
        arr[...]


@pytest.mark.parametrize("codec,meta", [("ZFP_ACC", 253), ("ZFP_PREC", 20)])
def test_a_zfp_stream_read_past_its_end_or_short_of_it_is_refused(tmp_path, codec, meta):
    path, want, chunk = _zfp_file(tmp_path, codec, meta)
    start = int.from_bytes(chunk[32:36], "little")  # block 0's, block 1's stream after it
    csize = int.from_bytes(chunk[start : start + 4], "little")
    for cut in (8, 64):
        blosc2_file_with_chunk(path, 0, restream(chunk, 0, lambda s, cut=cut: s[:-cut]))
        got = _theirs(path)
        assert got is not None and not _same(got, want)  # python-blosc2 read on, into block 1
        with b2store.open(path) as arr, pytest.raises(b2store.FormatError, match=(
            rf"{codec} stream of block 0 of chunk 0 at offset {start + 4}: expected a zfp "
            rf"stream of exactly its {csize - cut} bytes, found \d+ bytes read by zfp, past the "
            "stream's end"
        )):  # fmt: skip
            arr[...]
    blosc2_file_with_chunk(path, 0, restream(chunk, 0, lambda s: s + bytes(8)))
    assert _same(_theirs(path), want)
    with (
        b2store.open(path) as arr,
        pytest.raises(
            b2store.FormatError, match=rf"found {csize} bytes read by zfp, and 8 bytes after them"
        ),
    ):
        arr[...]
    # A meta byte one off: zfp reads the stream in another mode, python-blosc2 other values.
    for other in (meta - 1, meta + 1):
        blosc2_file_with_chunk(path, 0, _meta(other)(chunk))
        got = _theirs(path)
        assert got is not None and not _same(got, want)
        with (
            b2store.open(path) as arr,
            pytest.raises(
                b2store.FormatError,
                match=rf"{codec} stream of block 0 of chunk 0 .* of exactly its",
            ),
        ):
            arr[...]


def test_zfps_library_is_found_beside_zfpy_and_decodes_as_it_does():
    # Where it is not, each stream is decoded twice (the test below): the tests must see
    # which of the two a run has.
    assert zfp._library() is not None


def test_without_zfps_library_a_stream_is_decoded_twice(tmp_path, monkeypatch):
    """The fallback: bytes past the stream changed between two decodes, refused if the
    values change; bytes after a stream are then not seen (ZFP_RATE's size still is)."""
    monkeypatch.setattr(zfp, "_library", lambda: None)
    path, want, chunk = _zfp_file(tmp_path, "ZFP_ACC", 253)
    with b2store.open(path) as arr:
        assert _same(arr[...], want)
    blosc2_file_with_chunk(path, 0, restream(chunk, 1, lambda s: s[:-8]))
    with (
        b2store.open(path) as arr,
        pytest.raises(
            b2store.FormatError,
            match=r"ZFP_ACC stream of block 1 of chunk 0 .*bytes read past its end",
        ),
    ):
        arr[...]
    blosc2_file_with_chunk(path, 0, restream(chunk, 1, lambda s: s + bytes(8)))
    with b2store.open(path) as arr:
        assert _same(arr[...], want)
    path, want, chunk = _zfp_file(tmp_path, "ZFP_RATE", 50)
    blosc2_file_with_chunk(path, 0, restream(chunk, 1, lambda s: s + bytes(8)))
    with b2store.open(path) as arr, pytest.raises(b2store.FormatError, match="found 8008 bytes"):
        arr[...]


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_blocks_decode_as_zfps_own_round_trip_with_its_header(ndim, dtype):
    """zfp as the oracle: the bare stream of each mode decoded by b2store equals zfpy's
    decoding of the same field written with zfp's header (which names the mode itself)."""
    import zfpy

    shape = (5, 6, 7, 9)[-ndim:]  # edge cells on every side
    data = _data(shape, dtype, seed=ndim)
    typesize = data.itemsize
    for codec, meta in [(B2Codec.ZFP_ACC, 253), (B2Codec.ZFP_PREC, 20), (B2Codec.ZFP_RATE, 40)]:
        mode = zfp_mode(codec, meta, typesize, ndim)
        want = zfpy.decompress_numpy(zfpy.compress_numpy(data, write_header=True, **mode))
        bare = zfpy.compress_numpy(data, write_header=False, **mode)
        got = np.empty_like(data)
        decode = plugin_decoder(codec, meta, typesize, shape)(None)
        decode(memoryview(bare), got.reshape(-1).view(np.uint8))
        assert got.tobytes() == want.tobytes(), codec.name
        # What zfp writes is what it reads back, to the byte; a fixed rate's is known.
        padded = np.zeros(len(bare) + 1024 * data.nbytes, np.uint8)
        padded[: len(bare)] = np.frombuffer(bare, np.uint8)
        assert zfp._library().decode(padded, mode, typesize, np.empty_like(data)) == len(bare)
        if codec == B2Codec.ZFP_RATE:
            assert len(bare) == zfp.rate_stream_size(meta, typesize, shape)
