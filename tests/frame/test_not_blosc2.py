"""A file that is not Blosc2 at all says so first, and what it looks like where that is cheap
to tell, through every entry point; it stays a FormatError (naming the field too)."""

from __future__ import annotations

import gzip
import json
import zipfile

import numpy as np
import pytest

import b2store
from b2store.cli import main
from b2store.frame.sniff import NotBlosc2Error


def _files(d) -> dict[str, tuple[object, str]]:
    """name -> (path, what the message must say it looks like)."""
    np.save(d / "a.npy", np.arange(10))
    (d / "notes.txt").write_text("hello\n")
    (d / "long.txt").write_text("lorem ipsum dolor sit amet " * 10)
    (d / "empty.b2nd").write_bytes(b"")
    (d / "h5.nc").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(100))
    (d / "c3.nc").write_bytes(b"CDF\x01" + bytes(100))
    (d / "a.zarr").mkdir()
    (d / "a.zarr" / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group"}))
    with zipfile.ZipFile(d / "x.zip", "w") as z:
        z.writestr("a.txt", "hi")
    (d / "x.gz").write_bytes(gzip.compress(b"abc" * 100))
    chunk = b2store.encode_chunk(np.arange(100.0).tobytes(), typesize=8)
    (d / "chunk.bin").write_bytes(chunk)
    return {
        "npy": (d / "a.npy", r"a NumPy \.npy file"),
        "text": (d / "notes.txt", r"text: 'hello\\n'"),
        "long text": (d / "long.txt", r"text: 'lorem ipsum"),
        "empty": (d / "empty.b2nd", r"an empty file"),
        "hdf5": (d / "h5.nc", r"an HDF5 file"),
        "netcdf3": (d / "c3.nc", r"a netCDF-3 file"),
        "zarr dir": (d / "a.zarr", r"a Zarr store"),
        "zarr.json": (d / "a.zarr" / "zarr.json", r"a Zarr metadata document"),
        "zip": (d / "x.zip", r"a zip file"),
        "gzip": (d / "x.gz", r"a gzip file"),
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return _files(tmp_path_factory.mktemp("not-blosc2"))


NAMES = [
    "npy",
    "text",
    "long text",
    "empty",
    "hdf5",
    "netcdf3",
    "zarr dir",
    "zarr.json",
    "zip",
    "gzip",
]


@pytest.mark.parametrize("name", NAMES)
def test_open_says_not_a_blosc2_file(files, name):
    path, what = files[name]
    with pytest.raises(b2store.FormatError, match=rf"^{path}: not a Blosc2 file \({what}") as e:
        b2store.open(path)
    assert isinstance(e.value, NotBlosc2Error)
    assert e.value.field in ("frame magic", "chunks.b2frame")  # still names the field


def test_bytes_and_a_short_text(files):
    with pytest.raises(b2store.FormatError, match=r"not a Blosc2 file \(text: 'abc'\)"):
        b2store.open(b"abc")
    with pytest.raises(b2store.FormatError, match=r"not a Blosc2 file \(an empty file\)"):
        b2store.open(b"")


def test_a_chunk_is_blosc2_but_not_a_frame(tmp_path):
    chunk = b2store.encode_chunk(np.arange(100.0).tobytes(), typesize=8)
    (tmp_path / "c.bin").write_bytes(chunk)
    with pytest.raises(
        b2store.FormatError, match="not a single Blosc2 frame .a single Blosc chunk"
    ):
        b2store.open(tmp_path / "c.bin")


def test_a_tree_is_blosc2_but_not_a_frame(tmp_path):
    b2store.asarray(np.arange(3), urlpath=tmp_path / "t" / "a.b2nd").close()
    with pytest.raises(b2store.FormatError, match="not a single Blosc2 frame .a directory of"):
        b2store.open(tmp_path / "t")


def test_a_truncated_frame_is_still_a_frame(tmp_path):
    b2store.asarray(np.arange(1000.0), urlpath=tmp_path / "a.b2nd").close()
    head = (tmp_path / "a.b2nd").read_bytes()[:12]
    with pytest.raises(b2store.FormatError, match="expected 24 bytes of frame header") as e:
        b2store.open(head)
    assert not isinstance(e.value, NotBlosc2Error)


@pytest.mark.parametrize("name", ["npy", "text", "empty", "hdf5", "zarr dir"])
def test_xarray_engine_says_not_a_blosc2_file(files, name):
    xr = pytest.importorskip("xarray")
    path, what = files[name]
    with pytest.raises(b2store.FormatError, match=rf"not a Blosc2 file \({what}"):
        xr.open_dataset(path, engine="b2nd")


@pytest.mark.parametrize("name", ["npy", "text", "empty", "netcdf3", "zarr dir"])
def test_zarr_store_says_not_a_blosc2_file(files, name):
    zarr = pytest.importorskip("zarr")
    from b2store.integrations.zarr.store import B2ndStore

    path, what = files[name]
    with pytest.raises(b2store.FormatError, match=rf"not a Blosc2 file \({what}"):
        zarr.open(B2ndStore(path), mode="r")


@pytest.mark.parametrize("command", ["info", "dump", "verify"])
@pytest.mark.parametrize("name", ["npy", "text", "long text", "empty", "hdf5", "gzip"])
def test_cli_says_not_a_blosc2_file(files, command, name, capsys):
    path, what = files[name]
    assert main([command, str(path)]) == 2
    err = capsys.readouterr().err
    assert "not a Blosc2 file" in err
    assert len(err.strip().splitlines()) == 1, err


def test_cli_random_bytes_name_the_chunk_field(tmp_path, capsys):
    (tmp_path / "r.b2nd").write_bytes(bytes(range(216, 256)) + bytes(100))
    assert main(["dump", str(tmp_path / "r.b2nd")]) == 2
    err = capsys.readouterr().err
    assert "not a Blosc2 file (unrecognized bytes; as a chunk: version at offset 0" in err


# A zip is listed as a .b2z: one of other files is refused for holding no frames.
TREE_WHAT = {"zip": r"a zip file holding no Blosc2 frames"}


@pytest.mark.parametrize("name", NAMES)
def test_open_tree_says_not_a_blosc2_file(files, name):
    """A tree is listed only from Blosc2 content: another format is refused when the tree is
    opened, not listed as an empty tree (a Zarr store, a zip of other files) or as one array
    that fails when it is read (a text or .npy file)."""
    path, what = files[name]
    what = TREE_WHAT.get(name, what)
    with pytest.raises(NotBlosc2Error, match=rf"^{path}: not a Blosc2 file \({what}"):
        b2store.open_tree(path)


def test_open_tree_of_a_directory_of_other_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "readme.txt").write_text("no frames here")
    with pytest.raises(NotBlosc2Error, match="a directory holding no Blosc2 frames"):
        b2store.open_tree(tmp_path)
    # An empty directory is an empty tree; so is one holding only hidden files (locks).
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".b2store-lock").write_text("")
    assert b2store.open_tree(tmp_path / "empty").arrays() == {}
    # A frame beside the other files makes it a tree.
    b2store.asarray(np.arange(3), tmp_path / "sub" / "x.b2nd").close()
    assert list(b2store.open_tree(tmp_path).arrays()) == ["/sub/x"]
