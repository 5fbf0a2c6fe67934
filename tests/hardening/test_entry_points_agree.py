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


def test_the_store_names_the_key_of_the_lying_chunk(tmp_path):
    path, _ = _lying_frame(tmp_path, 0, "data")
    msg = r"^chunk c/0/0 nbytes at offset 4: expected 800, found 0"
    with pytest.raises(FormatError, match=msg):
        zarr.open_array(B2ndStore(path), mode="r")[:]


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
