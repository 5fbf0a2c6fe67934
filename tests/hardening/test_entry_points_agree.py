"""One defect, one error type, whatever the entry point: a chunk whose header lies about its
size is a FormatError through b2store.open, zarr over a B2ndStore, the xarray engine and the
numcodecs codecs alike (zarr once raised a bare ValueError about its ``out`` buffer)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import b2store
from b2store import FormatError
from b2store.frame.schunk import SChunk

zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")

from b2store.integrations.numcodecs.codec import B2nd, Blosc2  # noqa: E402
from b2store.integrations.zarr.store import B2ndStore  # noqa: E402

# nbytes values a corrupt header may hold: none, fewer (whole items, or not), a few more,
# one item short of the chunk, 1 GiB, the most an int32 holds, negative.
LYING_NBYTES = [0, 1, 8, 792, 808, 1 << 30, 2**31 - 1, -1]


def _lying_frame(tmp_path, nbytes: int, kind: str):
    """A 20x10 <f8 array in two 10x10 chunks, chunk 0's header nbytes replaced."""
    path = tmp_path / f"{kind}-{nbytes}.b2nd"
    x = np.arange(200, dtype="<f8").reshape(20, 10)
    if kind == "zeros":
        x[:] = 0  # stored as special chunks: only real chunks have a header to lie
        x[0, 0] = 1
    b2store.asarray(x, urlpath=path, chunks=(10, 10), blocks=(5, 10), mode="w")
    with SChunk.open(path) as s:
        _, start, _ = s.chunk_span(0)
        chunk = s.get_chunk(0)
    data = bytearray(path.read_bytes())
    struct.pack_into("<i", data, start + 4, nbytes)
    path.write_bytes(bytes(data))
    bad = bytearray(chunk)
    struct.pack_into("<i", bad, 4, nbytes)
    return path, bytes(bad)


@pytest.mark.parametrize("nbytes", LYING_NBYTES)
@pytest.mark.parametrize("kind", ["data", "zeros"])
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_lying_chunk_nbytes_is_a_format_error_everywhere(tmp_path, nbytes, kind):
    path, chunk = _lying_frame(tmp_path, nbytes, kind)
    with pytest.raises(FormatError, match="nbytes"):
        b2store.open(path)[:]
    with pytest.raises(FormatError, match="nbytes"):
        zarr.open_array(B2ndStore(path), mode="r")[:]
    # A partial read of chunk 0 reads its block starts first: which field it names depends on
    # the value (nbytes, or the block starts a larger nbytes would need), never not a field.
    with pytest.raises(FormatError, match=r"nbytes|bstarts"):
        zarr.open_array(B2ndStore(path), mode="r")[:3, :3]
    with pytest.raises(FormatError, match=r"nbytes|bstarts"):
        b2store.open(path)[:3, :3]
    with pytest.raises(FormatError, match="nbytes"):
        xr.open_dataarray(path, engine="b2nd").values  # noqa: B018
    # numcodecs: the blosc2 codec decoding into a buffer sized from the array's metadata,
    # and the b2nd codec, which knows the chunk shape.
    field = "nbytes at offset 4: expected " + ("a size >= 0" if nbytes < 0 else "800")
    with pytest.raises(FormatError, match=field):
        Blosc2().decode(chunk, out=np.empty(800, np.uint8))
    with pytest.raises(FormatError, match=field):
        B2nd((10, 10), (5, 10), "<f8").decode(chunk)


@pytest.mark.parametrize(
    "pipeline, msg",
    [
        # zarr's own pipeline decodes the store's chunks one key at a time: the key is named
        ("zarr.core.codec_pipeline.BatchedCodecPipeline",
         r"^chunk c/0/0 nbytes at offset 4: expected 800, found 0"),
        # b2store's reads the frame's box as b2store.open does: b2store.open's words
        ("b2store.integrations.zarr.pipeline.B2storeCodecPipeline",
         r"^chunk 0 nbytes: expected 800, found 0"),
    ],
)  # fmt: skip
def test_the_store_names_the_lying_chunk(tmp_path, pipeline, msg):
    path, _ = _lying_frame(tmp_path, 0, "data")
    with zarr.config.set({"codec_pipeline.path": pipeline}):
        with pytest.raises(FormatError, match=msg):
            zarr.open_array(B2ndStore(path), mode="r")[:]
    with pytest.raises(FormatError, match=r"^chunk 0 nbytes: expected 800, found 0"):
        b2store.open(path)[:]


# Entries of a single frame's ``_xarray`` coordinates that no writer makes: each once leaked
# NumPy's ValueError/TypeError (or an IndexError, or an object array) through zarr and xarray.
HOSTILE_COORDS = {
    "ragged": ({"data": [[1], [2, 3]]}, "data"),
    "objects": ({"data": [1, 2], "dtype": "O"}, "data"),
    "bad-dtype": ({"data": [1], "dtype": "zz9"}, "data"),
    "dtype-not-str": ({"data": [1], "dtype": 7}, "data"),
    "mapping": ({"data": {"a": 1}}, "data"),
    "none": ({"data": None}, "data"),
    "attrs-list": ({"data": [1, 2], "attrs": [1, 2]}, "attrs"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_COORDS))
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_hostile_embedded_coords_are_format_errors_in_zarr_and_xarray(tmp_path, case):
    spec, field = HOSTILE_COORDS[case]
    path = tmp_path / "v.b2nd"
    a = b2store.asarray(np.arange(4.0), urlpath=path, mode="w")
    a.vlmeta["_xarray"] = {"version": 1, "name": "v", "coords": {"x": spec}}
    a.vlmeta["_ARRAY_DIMENSIONS"] = ["x"]
    a.schunk.close()
    msg = rf"^vlmeta _xarray coords\['x'\] {field}: expected"
    with pytest.raises(FormatError, match=msg):
        zarr.open_group(B2ndStore(path, group=True), mode="r")["x"][:]
    with pytest.raises(FormatError, match=msg):
        xr.open_dataset(path, engine="b2nd")


def test_odd_but_harmless_embedded_coords_still_open(tmp_path):
    path = tmp_path / "v.b2nd"
    a = b2store.asarray(np.arange(4.0), urlpath=path, mode="w")
    coords = {"x": {"data": [1, 2], "dims": 5}, "c": {"data": ["a", "bb"]}}
    a.vlmeta["_xarray"] = {"version": 1, "name": "v", "coords": coords}
    a.vlmeta["_ARRAY_DIMENSIONS"] = ["t"]
    a.schunk.close()
    g = zarr.open_group(B2ndStore(path, group=True), mode="r")
    assert g["x"][:].tolist() == [1, 2] and g["c"][:].tolist() == ["a", "bb"]
    ds = xr.open_dataset(path, engine="b2nd")
    assert ds["c"].values.tolist() == ["a", "bb"]


@pytest.mark.parametrize("fill", ["abc", {"a": 1}, [1, 2], None])
def test_a_stored_zarr_fill_value_zarr_cannot_parse_is_a_format_error(tmp_path, fill):
    path = tmp_path / "v.b2nd"
    a = b2store.asarray(np.arange(4.0), urlpath=path, mode="w")
    a.vlmeta["_zarr_fill_value"] = fill  # once zarr's own TypeError ("Invalid type")
    a.schunk.close()
    with pytest.raises(FormatError, match="vlmeta _zarr_fill_value: expected a Zarr fill value"):
        zarr.open_array(B2ndStore(path), mode="r")


# --- fixed-header fields out of range (issue 35, item 7) ---------------------------------------
# Each field of a frame's 87-byte fixed header set to values out of its range, through every
# entry point. The header's codec, clevel, filters and blocksize are what new chunks get (each
# stored chunk says its own), so a frame whose header holds odd ones reads everywhere, as
# python-blosc2 reads it, and only a write that needs them refuses, naming the field: the
# xarray engine raised a bare ValueError from SChunk.params ("clevel must be 0..9, got 15").
# Fields the readers need are refused everywhere, with b2store's own error types only.

_X = np.arange(200, dtype="<f8").reshape(20, 10)

# (field, where its value lies in the fixed header, how it is stored, values out of range)
HEADER_FIELDS = [
    ("header_len", 11, ">i", [-1, 86, 2**31 - 1]),
    ("frame_len", 16, ">Q", [87, 2**64 - 1]),
    ("nbytes", 30, ">q", [-1, 1, 2**62]),
    ("cbytes", 39, ">q", [-1, 2**62]),
    ("typesize", 48, ">i", [0, 3, 2**31 - 1]),
    ("blocksize", 53, ">i", [-1, 2**31 - 1]),
    ("chunksize", 58, ">i", [-2, 0, 1, 2**31 - 1]),
    ("nthreads_comp", 63, ">h", [-1]),
    ("nthreads_decomp", 66, ">h", [-1]),
    ("general_flags", 25, "B", [0x00, 0xFF]),
    ("frame_type", 26, "B", [2]),
    ("codec", 27, "low", [7, 15]),
    ("clevel", 27, "high", [10, 15]),
    ("other_flags", 28, "B", [0xFF]),
    ("has_vlmeta", 68, "B", [0x01]),
    ("filters", 71, "B", [7, 38, 200]),
    ("udcodec", 77, "B", [250]),
    ("codec-in-udcodec", 77, "ud", [250]),  # (the codec nibble 6: "the udcodec byte says")
    ("codec_meta", 78, "B", [255]),
    ("filters_meta", 84, "B", [255]),
    ("other_flags2", 85, "B", [0xFF]),
]
HEADER_CASES = [(f, at, how, v) for f, at, how, values in HEADER_FIELDS for v in values]
# The header's parameters for new chunks: a write refuses these, naming the field.
_NEW_CHUNK_FIELDS = {
    ("blocksize", -1): "blocksize at offset 53",
    ("blocksize", 2**31 - 1): "blocksize at offset 53",
    ("clevel", 10): "clevel at offset 27",
    ("clevel", 15): "clevel at offset 27",
    ("filters", 7): "filters at offset 71",
    ("filters", 38): "filters at offset 71",
    ("filters", 200): "filters at offset 71",
}
# udcodec 250 is the codec only where the codec nibble says "the udcodec byte" (6 and up).
_NEW_CHUNK_FIELDS[("codec-in-udcodec", 250)] = "codec at offset 77"
# python-blosc2 4.14 refuses these (c-blosc2 will not make a compression context of a filter
# id it does not know; its Python layer overflows on the int8 meta): b2store reads the chunks,
# which each say their own filters. And it reads these, which b2store refuses loudly: a
# frame format version 0 (none exists) and a has_vlmeta byte that is no msgpack bool.
_ONLY_B2STORE_READS = {("filters", 7), ("filters", 38), ("filters_meta", 255)}
_ONLY_PYBLOSC2_READS = {("general_flags", 0), ("has_vlmeta", 1)}


def _odd_header(tmp_path, field: str, at: int, how: str, value: int):
    path = tmp_path / f"{field}.b2nd"
    b2store.to_b2nd(
        xr.Dataset({"v": (("y", "x"), _X)}),
        path,
        encoding={"v": {"chunks": (10, 10), "blocks": (5, 10)}},
    )
    data = bytearray(path.read_bytes())
    if how == "B":
        data[at] = value
    elif how == "low":
        data[at] = data[at] & 0xF0 | value
    elif how == "high":
        data[at] = data[at] & 0x0F | value << 4
    elif how == "ud":
        data[27], data[at] = data[27] & 0xF0 | 6, value
    else:
        struct.pack_into(how, data, at, value)
    path.write_bytes(bytes(data))
    return path


def _outcome(read):
    """``("ok", values)`` or ``(error type, message)``; an error not b2store's fails."""
    try:
        return "ok", np.asarray(read())
    except b2store.B2StoreError as exc:
        return type(exc), str(exc)


def _command(*args) -> tuple[int, str]:
    import contextlib
    import io

    from b2store.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize(
    ("field", "at", "how", "value"), HEADER_CASES, ids=[f"{c[0]}={c[3]}" for c in HEADER_CASES]
)
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_an_out_of_range_header_field_gets_one_answer_everywhere(tmp_path, field, at, how, value):
    path = _odd_header(tmp_path, field, at, how, value)
    readers = {
        "open": lambda: b2store.open(path)[:],
        "open-part": lambda: b2store.open(path)[:3, 2:5],
        "zarr": lambda: zarr.open_array(B2ndStore(path), mode="r")[:],
        "zarr-part": lambda: zarr.open_array(B2ndStore(path), mode="r")[:3, 2:5],
        "xarray": lambda: xr.open_dataset(path, engine="b2nd")["v"].values,
        "xarray-dask": lambda: xr.open_dataset(path, engine="b2nd", chunks={})["v"].values,
    }
    got = {name: _outcome(read) for name, read in readers.items()}
    info, verify = _command("info", path), _command("verify", path)
    kinds = {kind for kind, _ in got.values()}
    assert len(kinds) == 1, got  # every reader reads, or every one refuses alike
    (kind,) = kinds
    if kind == "ok":
        for name, (_, values) in got.items():
            want = _X[:3, 2:5] if name.endswith("part") else _X
            assert np.array_equal(values, want), name
        assert info[0] == 0 and verify[0] == 0 and "ok" in verify[1], (info, verify)
    else:
        messages = {message for _, message in got.values()}
        assert len(messages) == 1, got  # the same words
        (message,) = messages
        assert info == (2, f"b2store: {message}\n"), info
        assert verify[0] == 1 and message in verify[1], verify
    _write(path, field, value, kind)
    _pyblosc2_agrees(path, field, value, kind)


def _write(path, field, value, kind) -> None:
    """A write into the frame: done and read back, or refused with b2store's own error,
    naming the header's field when it is a parameter of new chunks."""
    ds = xr.Dataset({"v": (("y", "x"), _X[:3])})
    named = _NEW_CHUNK_FIELDS.get((field, value))
    writes = {
        "append": lambda: b2store.to_b2nd(ds, path, mode="a", append_dim="y"),
        "setitem": lambda: b2store.open(path, mode="a").__setitem__((0, 0), -1.0),
        "zarr": lambda: zarr.open_array(B2ndStore(path, mode="a"), mode="a").__setitem__(
            (1, 1), -2.0
        ),
    }
    for name, write in writes.items():
        try:
            write()
        except b2store.B2StoreError as exc:
            if kind == "ok":  # the frame reads: only its parameters for new chunks stop it
                assert named is not None and str(exc).startswith(named), (name, exc)
                assert isinstance(exc, FormatError)
            continue
        assert kind == "ok" and named is None, name
    if kind == "ok" and named is None:
        with b2store.open(path) as a:
            assert a.shape == (23, 10) and a[0, 0] == -1.0 and a[1, 1] == -2.0
            assert np.array_equal(a[20:], _X[:3]) and np.array_equal(a[2:20], _X[2:])


def _pyblosc2_agrees(path, field, value, kind) -> None:
    """python-blosc2 reads what b2store reads (the same values), but for the cases listed."""
    blosc2 = pytest.importorskip("blosc2")
    try:
        theirs = blosc2.open(str(path))[:]
    except Exception:  # (python-blosc2's refusals are its RuntimeErrors and the like)
        theirs = None
    with b2store.open(path) if kind == "ok" else _nothing() as mine:
        if mine is not None:
            mine = mine[:]
    if (field, value) in _ONLY_B2STORE_READS:
        assert theirs is None and mine is not None
    elif (field, value) in _ONLY_PYBLOSC2_READS:
        assert theirs is not None and mine is None
    elif mine is None:
        assert theirs is None
    else:
        assert theirs is not None and np.array_equal(mine, theirs)


def _nothing():
    import contextlib

    return contextlib.nullcontext()
