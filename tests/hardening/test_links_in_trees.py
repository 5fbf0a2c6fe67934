"""Writers never follow a symbolic link inside a tree, wherever the path they are given
enters it.

A ``.b2d`` tree whose group folder (or member) was replaced by a link is written to by each
writer, in each mode: ``to_b2nd`` (w, w-, a, a-, r+; frames and sub-trees), ``asarray`` and
the other creators, ``SChunk``, region writes, appends and resizes of ``b2store.open``,
``B2ndStore`` (rooted at the tree, at the group, at the frame) and the command line's
``convert`` and ``decode``. Each must raise ``LinkError`` (a ``PermissionError``) naming the
link before it writes a byte: nothing outside the tree is created or changed, and the tree
itself is as it was. Links are planted to a directory outside (with the group's files moved
there), dangling, to a directory inside the tree (refused too: see ``_files.check_write``)
and, for writers of a member, to a frame outside.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import b2store
from b2store import FormatError, LinkError, SChunk, _files

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")


def snapshot(top: Path) -> dict:
    """Every file and directory under ``top`` (links not followed) and each file's bytes."""
    found = {}
    for dirpath, dirs, files in os.walk(top):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                found[os.path.relpath(p, top)] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                found[os.path.relpath(p, top)] = ("dir",)
            else:
                with open(p, "rb") as fh:
                    found[os.path.relpath(p, top)] = ("file", fh.read())
    return found


def make_tree(base: Path) -> Path:
    """``t.b2d``: variable ``r`` at the root; group ``g`` holding ``v`` (a tree member),
    ``s.b2nd`` (a single-frame Dataset, for appends and regions) and ``sp.b2nd`` (a sparse
    frame); group ``h`` (replaced by ``g`` for a link inside the tree)."""
    tree = base / "t.b2d"
    b2store.to_b2nd(
        xr.DataTree.from_dict(
            {
                "/": xr.Dataset({"r": ("x", np.arange(4.0))}),
                "/g": xr.Dataset({"v": ("t", np.arange(10.0))}),
                "/h": xr.Dataset({"w": ("t", np.arange(3.0))}),
            }
        ),
        tree,
    )
    b2store.to_b2nd(xr.Dataset({"s": ("t", np.arange(10.0))}), tree / "g" / "s.b2nd")
    b2store.asarray(np.arange(10.0), tree / "g" / "sp.b2nd", chunks=(5,), contiguous=False).close()
    return tree


def plant(kind: str, tree: Path, outside: Path) -> Path:
    """Replace the group ``g`` (or its member ``s.b2nd``) by a link of ``kind``; the link."""
    group = tree / "g"
    if kind == "dir-outside":  # the group moved out, the link in its place
        shutil.copytree(group, outside / "g")
        shutil.rmtree(group)
        os.symlink(outside / "g", group)
        return group
    if kind == "dangling":
        shutil.rmtree(group)
        os.symlink(outside / "made-outside", group)
        return group
    if kind == "dir-inside":  # g's files moved to h, g a link to h
        shutil.rmtree(tree / "h")
        os.rename(group, tree / "h")
        os.symlink("h", group)
        return group
    if kind == "member-outside":  # the frame s.b2nd moved out, the link in its place
        member = group / "s.b2nd"
        shutil.copy(member, outside / "s.b2nd")
        member.unlink()
        os.symlink(outside / "s.b2nd", member)
        return member
    raise AssertionError(kind)


def _ds(n=3, name="s"):
    return xr.Dataset({name: ("t", np.arange(float(n)))})


def _cli(*args) -> None:
    """The command line in this process; its refusal raised as the error it printed."""
    from b2store.cli import main

    if main([str(a) for a in args]) != 0:
        raise _CliRefused()


class _CliRefused(Exception):
    pass


def _zarr_write(store_root, path, value=7) -> None:
    arr = zarr.open_array(b2store.B2ndStore(store_root, mode="a"), path=path, mode="a")
    arr[:2] = value


def _resize(p) -> None:
    with b2store.open(p, mode="a") as a:
        a.resize((12,))


def _append_schunk(p) -> None:
    with SChunk.open(p, mode="a") as s:
        s.append_data(np.zeros(s.chunksize // s.typesize, f"V{s.typesize}"))


def _region(p) -> None:
    with b2store.open(p, mode="a") as a:
        a[:3] = 7


# Writers of a path under the group ``g`` (``tree`` is the .b2d): (name, function of tree).
UNDER_GROUP = {
    "to_b2nd-w-new": lambda t: b2store.to_b2nd(_ds(), t / "g" / "new.b2nd", mode="w"),
    "to_b2nd-w-existing": lambda t: b2store.to_b2nd(_ds(), t / "g" / "s.b2nd", mode="w"),
    "to_b2nd-w-minus": lambda t: b2store.to_b2nd(_ds(), t / "g" / "new.b2nd", mode="w-"),
    "to_b2nd-w-sparse": lambda t: b2store.to_b2nd(
        _ds(), t / "g" / "new.b2nd", mode="w", contiguous=False
    ),
    "to_b2nd-w-subtree": lambda t: b2store.to_b2nd(
        xr.merge([_ds(), _ds(name="u")]), t / "g" / "sub.b2d", mode="w"
    ),
    "to_b2nd-w-b2z": lambda t: b2store.to_b2nd(_ds(), t / "g" / "sub.b2z", mode="w"),
    "to_b2nd-a-append": lambda t: b2store.to_b2nd(
        _ds(), t / "g" / "s.b2nd", mode="a", append_dim="t"
    ),
    "to_b2nd-a-minus": lambda t: b2store.to_b2nd(
        _ds(), t / "g" / "s.b2nd", mode="a-", append_dim="t"
    ),
    "to_b2nd-a-new": lambda t: b2store.to_b2nd(_ds(), t / "g" / "new.b2nd", mode="a"),
    "to_b2nd-r+": lambda t: b2store.to_b2nd(
        _ds(), t / "g" / "s.b2nd", mode="r+", region={"t": slice(0, 3)}
    ),
    "to_b2nd-a-group": lambda t: b2store.to_b2nd(
        xr.Dataset({"v": ("t", np.arange(3.0))}), t / "g", mode="a", append_dim="t"
    ),
    "asarray": lambda t: b2store.asarray(np.arange(5), t / "g" / "new.b2nd").close(),
    "asarray-existing": lambda t: b2store.asarray(np.arange(5), t / "g" / "s.b2nd").close(),
    "asarray-sparse": lambda t: b2store.asarray(
        np.arange(5), t / "g" / "new.b2nd", contiguous=False
    ).close(),
    "zeros": lambda t: b2store.zeros((4,), urlpath=t / "g" / "new.b2nd").close(),
    "full": lambda t: b2store.full((4,), 7, urlpath=t / "g" / "new.b2nd").close(),
    "frombuffer": lambda t: b2store.frombuffer(
        bytes(8), (2,), "i4", urlpath=t / "g" / "new.b2nd"
    ).close(),
    "schunk-create": lambda t: SChunk.create(t / "g" / "new.b2frame", typesize=4).close(),
    "region": lambda t: _region(t / "g" / "s.b2nd"),
    "region-sparse": lambda t: _region(t / "g" / "sp.b2nd"),
    "resize": lambda t: _resize(t / "g" / "s.b2nd"),
    "schunk-append": lambda t: _append_schunk(t / "g" / "s.b2nd"),
    "schunk-append-sparse": lambda t: _append_schunk(t / "g" / "sp.b2nd"),
    "store-new-array": lambda t: zarr.create_array(
        b2store.B2ndStore(t, mode="a"), name="g/n", shape=(4,), dtype="f8", chunks=(2,)
    ),
    "store-at-group": lambda t: _zarr_write(t / "g", "v"),
    "store-at-frame": lambda t: _zarr_write(t / "g" / "s.b2nd", None),
    "convert-b2nd": lambda t: _cli("convert", t.parent / "src.npy", t / "g" / "c.b2nd"),
    "convert-npy": lambda t: _cli("convert", t.parent / "src.npy", t / "g" / "c.npy"),
    "convert-b2d": lambda t: _cli("convert", t.parent / "src.npy", t / "g" / "c.b2d"),
    "convert-overwrite": lambda t: _cli(
        "convert", "--overwrite", t.parent / "src.npy", t / "g" / "s.b2nd"
    ),
    "decode": lambda t: _cli("decode", t.parent / "chunk.b2", "-o", t / "g" / "out.raw"),
}

# Writers of the member g/s.b2nd itself, for a link planted there.
AT_MEMBER = [
    "to_b2nd-w-existing",
    "to_b2nd-a-append",
    "to_b2nd-r+",
    "asarray-existing",
    "region",
    "resize",
    "schunk-append",
    "store-at-frame",
    "convert-overwrite",
]


@pytest.fixture
def place(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    np.save(tmp_path / "src.npy", np.arange(6.0))
    (tmp_path / "chunk.b2").write_bytes(b2store.encode_chunk(np.arange(8, dtype="<i4")))
    return make_tree(tmp_path), outside


def _refused(write, tree: Path, outside: Path, link: Path, capsys) -> None:
    before, inside = snapshot(outside), snapshot(tree)
    message = re.escape(f"{link} is a symbolic link: b2store does not write through links")
    try:
        write(tree)
    except _CliRefused:
        err = capsys.readouterr().err
        assert re.search(message, err), err  # (the command's one line says the same)
    else:
        pytest.fail("the write through a link in the tree was not refused")
    assert snapshot(outside) == before  # nothing outside created or changed
    assert not (outside / "made-outside").exists()
    assert snapshot(tree) == inside  # and the tree is as it was


@pytest.mark.parametrize("kind", ["dir-outside", "dangling", "dir-inside"])
@pytest.mark.parametrize("writer", sorted(UNDER_GROUP))
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_write_under_a_linked_group_is_refused(place, kind, writer, capsys):
    tree, outside = place
    link = plant(kind, tree, outside)
    message = re.escape(f"{link} is a symbolic link: b2store does not write through links")
    if writer.startswith(("convert", "decode")):
        _refused(UNDER_GROUP[writer], tree, outside, link, capsys)
        return
    before, inside = snapshot(outside), snapshot(tree)
    with pytest.raises(LinkError, match=message) as exc:
        UNDER_GROUP[writer](tree)
    assert isinstance(exc.value, PermissionError)
    assert exc.value.path == str(link)
    assert snapshot(outside) == before  # nothing outside created or changed
    assert not (outside / "made-outside").exists()
    assert snapshot(tree) == inside  # and the tree is as it was


@pytest.mark.parametrize("writer", AT_MEMBER)
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_write_of_a_linked_member_is_refused(place, writer, capsys):
    tree, outside = place
    link = plant("member-outside", tree, outside)
    if writer.startswith("convert"):
        _refused(UNDER_GROUP[writer], tree, outside, link, capsys)
        return
    before, inside = snapshot(outside), snapshot(tree)
    message = re.escape(f"{link} is a symbolic link: b2store does not write through links")
    with pytest.raises(LinkError, match=message):
        UNDER_GROUP[writer](tree)
    assert snapshot(outside) == before
    assert snapshot(tree) == inside


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_appending_to_a_tree_refuses_a_linked_member(place):
    # to_b2nd(mode="a") into the tree itself: the root's member r.b2nd is a link outside
    tree, outside = place
    shutil.copy(tree / "r.b2nd", outside / "r.b2nd")
    (tree / "r.b2nd").unlink()
    os.symlink(outside / "r.b2nd", tree / "r.b2nd")
    before, inside = snapshot(outside), snapshot(tree)
    ds = xr.Dataset({"r": ("x", np.arange(2.0))})
    with pytest.raises(LinkError, match=re.escape(f"{tree / 'r.b2nd'} is a symbolic link")):
        b2store.to_b2nd(ds, tree, mode="a", append_dim="x")
    assert snapshot(outside) == before
    assert snapshot(tree) == inside


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_link_to_the_tree_itself_is_the_users_and_is_followed(place):
    # The tree root reached through the user's own link: written, in the real tree.
    tree, outside = place
    os.symlink(tree, outside / "via")
    b2store.to_b2nd(_ds(), outside / "via" / "g" / "new.b2nd")
    b2store.to_b2nd(_ds(), outside / "via" / "g" / "s.b2nd", mode="a", append_dim="t")
    with b2store.open(outside / "via" / "g" / "sp.b2nd", mode="a") as a:
        a[:2] = 9
    assert b2store.open(tree / "g" / "new.b2nd")[:].tolist() == [0.0, 1.0, 2.0]
    assert b2store.open(tree / "g" / "s.b2nd").shape == (13,)
    assert b2store.open(tree / "g" / "sp.b2nd")[:3].tolist() == [9.0, 9.0, 2.0]
    assert sorted(os.listdir(outside)) == ["via"]


def test_a_users_link_into_a_tree_still_meets_the_trees_own_links(place):
    # The user's shortcut points at t.b2d/g, itself a link planted in the tree: the walk
    # follows the shortcut into the tree, where the planted link is refused.
    tree, outside = place
    link = plant("dir-outside", tree, outside)
    os.symlink(tree / "g", tree.parent / "shortcut")
    before = snapshot(outside)
    with pytest.raises(LinkError, match=re.escape(f"{link} is a symbolic link")):
        b2store.asarray(np.arange(3), tree.parent / "shortcut" / "new.b2nd")
    assert snapshot(outside) == before


def test_dot_dot_cannot_step_around_a_linked_group(place):
    tree, outside = place
    link = plant("dir-outside", tree, outside)
    before = snapshot(outside)
    with pytest.raises(LinkError, match=re.escape(f"{link} is a symbolic link")):
        b2store.asarray(np.arange(3), tree / "g" / ".." / "g" / "new.b2nd")
    assert snapshot(outside) == before


def test_a_frame_swapped_for_a_link_after_opening_is_never_written(place):
    # Between the check (when the frame is opened for writing) and its first write, the
    # frame is replaced by a link: the write opens it with O_NOFOLLOW and refuses it.
    tree, outside = place
    member = tree / "g" / "s.b2nd"
    arr = b2store.open(member, mode="a")
    try:
        shutil.copy(member, outside / "s.b2nd")
        member.unlink()
        os.symlink(outside / "s.b2nd", member)
        before = snapshot(outside)
        with pytest.raises(LinkError, match=re.escape(f"{member} is a symbolic link")):
            arr[:3] = 7
        assert snapshot(outside) == before
    finally:
        arr.close()


@pytest.mark.parametrize(
    "field, value",
    [
        ("dst", "../outside/x.b2nd"),
        ("dst", "/etc/x.b2nd"),
        ("frame", "../outside/s.b2nd"),
        ("frame", "g/s.b2nd"),  # a link in the tree
        ("src", "../../elsewhere/x.b2nd"),
    ],
)
def test_a_journal_never_sends_a_write_out_of_its_tree(place, field, value):
    """A hostile or damaged commit journal naming paths outside the tree (or through a link
    in it) is refused before it is rolled forward: nothing outside is renamed or written."""
    from b2store import journal

    tree, outside = place
    plant("member-outside", tree, outside)
    shutil.copy(outside / "s.b2nd", outside / "x.b2nd")
    head = (outside / "s.b2nd").read_bytes()[:64]
    work = tree.parent / f".t.b2d.{os.getpid() + 1}.{'0' * 12}.tmp"
    work.mkdir()
    (work / "x.b2nd").write_bytes(b"new")
    doc = {"version": 1, "frames": [], "renames": [["../" + work.name + "/x.b2nd", "x.b2nd", None]]}
    if field == "dst":
        doc["renames"][0][1] = value
    elif field == "src":
        doc["renames"][0][0] = value
    else:
        doc["frames"] = [{"path": value, "old": head.hex(), "new": head.hex(), "new_len": 64}]
    (tree / journal.JOURNAL_NAME).write_text(json.dumps(doc))
    before = snapshot(outside)
    expected = (LinkError, FormatError) if value == "g/s.b2nd" else FormatError
    with pytest.raises(expected, match=r"symbolic link|\.b2store-commit\.json"):
        journal.recover(tree)
    assert snapshot(outside) == before


def test_check_write_returns_the_tree_and_follows_the_users_links(tmp_path):
    tree = tmp_path / "t.b2d"
    (tree / "g").mkdir(parents=True)
    plain = tmp_path / "plain"
    (plain / "a").mkdir(parents=True)
    (plain / "embed.b2e").touch()  # a tree by python-blosc2's mark, whatever its name
    os.symlink(plain / "a", tmp_path / "users-link")
    assert _files.check_write(tree / "g" / "x.b2nd") == tree
    assert _files.check_write(tree / "new" / "deeper" / "x.b2nd") == tree  # not there yet
    assert _files.check_write(tmp_path / "x.b2nd") is None
    assert _files.check_write(plain / "a" / "x.b2nd") == plain
    # the user's link is followed into the tree it names (and then nothing below is)
    assert _files.check_write(tmp_path / "users-link" / "x.b2nd") == plain
    os.symlink(tmp_path, plain / "a" / "up")
    up = tmp_path / "users-link" / "up"  # (named as the user's path reaches it)
    with pytest.raises(LinkError, match=re.escape(f"{up} is a symbolic link")):
        _files.check_write(tmp_path / "users-link" / "up" / "x.b2nd")
    # a root given by the writer makes any directory a tree
    (tmp_path / "d").mkdir()
    os.symlink(tmp_path, tmp_path / "d" / "l")
    assert _files.check_write(tmp_path / "d" / "l" / "x") is None  # no tree: followed
    with pytest.raises(LinkError, match=re.escape(f"{tmp_path / 'd' / 'l'} is a symbolic")):
        _files.check_write(tmp_path / "d" / "l" / "x", tmp_path / "d")
    with pytest.raises(ValueError, match="is not inside"):
        _files.check_write(tmp_path / "x", tmp_path / "d")
