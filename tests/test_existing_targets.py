"""Writers refuse an existing target unless told to replace it (issue 39).

``asarray``, ``zeros``, ``empty``, ``full``, ``frombuffer`` and ``to_b2nd`` used to replace
what was at their path by default: a tree of 100 MB went for a 3-element Dataset without a
word. They now follow python-blosc2 (which refuses an existing ``urlpath`` unless
``mode="w"``) and ``to_zarr`` (default mode ``"w-"``): the default refuses with a
:class:`b2store.TargetExistsError` (a FileExistsError) naming the path and the mode to pass,
before any work, and leaves the target as it was; ``mode="w"`` replaces.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

import b2store
from b2store import TargetExistsError

xr = pytest.importorskip("xarray")

ARRAY_WAY_OUT = "pass mode='w' to replace it"
DATASET_WAY_OUT = (
    "pass mode='w' to replace it, or mode='a' to write into it (append_dim='<dim>' to append "
    "along a dimension)"
)


def _ds(n: int = 3) -> xr.Dataset:
    return xr.Dataset({"t": ("x", np.arange(float(n)))}, {"x": np.arange(n)})


# name -> (write(path, **mode), the mode its default is named by, the way out it names)
WRITERS = {
    "asarray": (lambda p, **kw: b2store.asarray(np.arange(4.0), p, **kw), "x", ARRAY_WAY_OUT),
    "asarray-sparse": (
        lambda p, **kw: b2store.asarray(np.arange(4.0), p, contiguous=False, **kw),
        "x",
        ARRAY_WAY_OUT,
    ),
    "zeros": (lambda p, **kw: b2store.zeros(4, urlpath=p, **kw), "x", ARRAY_WAY_OUT),
    "empty": (lambda p, **kw: b2store.empty(4, urlpath=p, **kw), "x", ARRAY_WAY_OUT),
    "full": (lambda p, **kw: b2store.full(4, 7.0, urlpath=p, **kw), "x", ARRAY_WAY_OUT),
    "frombuffer": (
        lambda p, **kw: b2store.frombuffer(np.arange(4.0).tobytes(), 4, "f8", p, **kw),
        "x",
        ARRAY_WAY_OUT,
    ),
    "to_b2nd-frame": (lambda p, **kw: b2store.to_b2nd(_ds(), p, **kw), "w-", DATASET_WAY_OUT),
    "to_b2nd-b2d": (lambda p, **kw: b2store.to_b2nd(_ds(), p, **kw), "w-", DATASET_WAY_OUT),
    "to_b2nd-b2z": (lambda p, **kw: b2store.to_b2nd(_ds(), p, **kw), "w-", DATASET_WAY_OUT),
}
SUFFIX = {"to_b2nd-b2d": ".b2d", "to_b2nd-b2z": ".b2z"}


def _target(tmp_path: Path, name: str) -> Path:
    return tmp_path / f"target{SUFFIX.get(name, '.b2nd')}"


def _snapshot(path: Path) -> dict:
    """What is at ``path``: its bytes, or every file's under it."""
    if path.is_dir():
        return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}
    return {"": path.read_bytes()}


def _message(path, mode: str, way_out: str) -> str:
    return re.escape(f"{path} exists and mode={mode!r} does not replace it: {way_out}")


def _close(made) -> None:
    if hasattr(made, "close"):
        made.close()


@pytest.mark.parametrize("name", list(WRITERS))
@pytest.mark.parametrize("kept", ["file", "tree"])
def test_the_default_refuses_what_is_there_and_keeps_it(tmp_path, name, kept):
    write, mode, way_out = WRITERS[name]
    path = _target(tmp_path, name)
    if kept == "file":
        path.write_bytes(b"someone's data")
    else:
        b2store.to_b2nd(_ds(100), tmp_path / "kept.b2d")
        os.rename(tmp_path / "kept.b2d", path)
    before = _snapshot(path)
    with pytest.raises(TargetExistsError, match=_message(path, mode, way_out)) as info:
        write(path)
    assert isinstance(info.value, FileExistsError)
    assert (info.value.path, info.value.mode, info.value.filename) == (str(path), mode, str(path))
    assert info.value.errno == 17
    assert _snapshot(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # nothing staged left


@pytest.mark.parametrize("name", list(WRITERS))
def test_mode_w_replaces_what_is_there(tmp_path, name):
    write, _, _ = WRITERS[name]
    path = _target(tmp_path, name)
    path.write_bytes(b"someone's data")
    _close(write(path, mode="w"))
    assert path.read_bytes() != b"someone's data" if path.is_file() else path.is_dir()
    with pytest.raises(TargetExistsError):
        write(path)  # and the new one is refused in turn


@pytest.mark.parametrize("name", ["asarray", "zeros", "to_b2nd-frame"])
def test_a_link_to_nothing_is_refused_too(tmp_path, name):
    # A write there would create the link's target, wherever it points.
    write, mode, way_out = WRITERS[name]
    path = _target(tmp_path, name)
    path.symlink_to(tmp_path / "nowhere.b2nd")
    with pytest.raises(TargetExistsError, match=_message(path, mode, way_out)):
        write(path)
    assert path.is_symlink() and not (tmp_path / "nowhere.b2nd").exists()


def test_the_explicit_spellings_refuse_as_the_default_does(tmp_path):
    path = tmp_path / "a.b2nd"
    b2store.asarray(np.arange(3), path).close()
    for mode in ("x", "w-"):
        with pytest.raises(TargetExistsError, match=_message(path, mode, ARRAY_WAY_OUT)):
            b2store.asarray(np.arange(3), path, mode=mode)
    with pytest.raises(TargetExistsError, match=_message(path, "x", DATASET_WAY_OUT)):
        b2store.to_b2nd(_ds(), path, mode="x")
    with pytest.raises(ValueError, match=r"mode must be 'x' \(create, refusing an existing"):
        b2store.asarray(np.arange(3), path, mode="a")


def test_appends_and_regions_still_write_into_what_is_there(tmp_path):
    path = tmp_path / "t.b2d"
    b2store.to_b2nd(_ds(), path)
    b2store.to_b2nd(_ds().assign_coords(x=[3, 4, 5]), path, append_dim="x")
    b2store.to_b2nd(_ds() * 0, path, region={"x": slice(0, 3)})
    with xr.open_dataset(path, engine="b2nd") as back:
        np.testing.assert_array_equal(back.t.values, [0, 0, 0, 0, 1, 2])


@pytest.mark.parametrize("rename_new", ["one step", "checked"])
@pytest.mark.parametrize("name", ["asarray", "asarray-sparse", "to_b2nd-frame", "to_b2nd-b2d"])
def test_a_target_made_during_the_write_is_kept(tmp_path, monkeypatch, name, rename_new):
    """Another process makes the target after the writer's first check: the array, built
    beside, is not put over it (one rename that does not replace, where Linux has one; a
    check just before the rename elsewhere)."""
    from b2store import _platform
    from b2store.integrations.xarray import frames
    from b2store.nd import create

    if rename_new == "checked":
        monkeypatch.setattr(_platform, "rename_new", lambda a, b: None)
    write, mode, way_out = WRITERS[name]
    path = _target(tmp_path, name)

    def racing(real):
        def made_meanwhile(*args, **kwargs):
            path.write_bytes(b"the other writer's")
            return real(*args, **kwargs)

        return made_meanwhile

    if name.startswith("asarray"):
        monkeypatch.setattr(create, "encode_chunks", racing(create.encode_chunks))
    else:
        monkeypatch.setattr(frames, "write_frame", racing(frames.write_frame))
        monkeypatch.setattr(frames, "_write_tree", racing(frames._write_tree))
    with pytest.raises(TargetExistsError, match=_message(path, mode, way_out)):
        write(path)
    assert path.read_bytes() == b"the other writer's"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_python_blosc2_refuses_an_existing_urlpath_as_b2store_does(tmp_path):
    blosc2 = pytest.importorskip("blosc2")
    path = tmp_path / "a.b2nd"
    b2store.asarray(np.arange(3), path).close()
    makers = {
        "asarray": (lambda p, **kw: blosc2.asarray(np.arange(3), urlpath=str(p), **kw)),
        "zeros": (lambda p, **kw: blosc2.zeros(3, urlpath=str(p), **kw)),
        "full": (lambda p, **kw: blosc2.full(3, 1, urlpath=str(p), **kw)),
    }
    for make in makers.values():
        with pytest.raises(RuntimeError):  # (python-blosc2's words: "Error while creating")
            make(path)
        make(path, mode="w")
    for name in makers:
        with pytest.raises(TargetExistsError):
            WRITERS[name][0](path)
