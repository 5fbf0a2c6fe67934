"""Trees of b2nd arrays: a directory of frames, python-blosc2's ``.b2d`` and ``.b2z`` stores,
or one frame, listed as groups (with their attributes) and arrays (as reopenable references).

The layouts (python-blosc2's ``DictStore``/``TreeStore``):

- a **directory** of ``.b2nd`` files; a subdirectory holding ``chunks.b2frame`` is a sparse
  frame (an array named after it), any other subdirectory a group;
- a **.b2d** directory: the same, plus ``embed.b2e`` (a frame holding small values, whose
  vlmeta carries the store's kind) and a ``__vlmeta__.b2f`` per group whose vlmeta are the
  group's attributes (``/grp/lon`` is ``grp/lon.b2nd``);
- a **.b2z** zip of the same members, stored uncompressed so that each member is a frame
  that can be read where it lies: its data starts after the local header
  (``header offset + 30 + name length + extra length``); members that are no frames (another
  writer's manifest) may be deflated, and are read whole by :meth:`Tree.read_file`;
- a single frame (file or sparse-frame directory): one array named after the file.

Listing reads directory entries or the zip's central directory, never array data.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from . import api, journal
from .containers import Container, ContainerNotArrayError
from .errors import FormatError
from .frame.backend import INDEX_NAME
from .frame.header import FrameHeader
from .frame.sniff import FRAME_PREFIX_LENGTH, NotBlosc2Error, looks_like_directory
from .frame.sources import is_url
from .limits import LimitError, Limits, resolve
from .nd.array import B2ndArray
from .tree_files import TreeFiles, short_path
from .zipdir import STORED, member_data_offset, read_member, zip_members

__all__ = ["open_tree", "Tree", "ArrayRef", "open_frame", "is_url"]

ARRAY_EXT = ".b2nd"
SCHUNK_EXT = ".b2f"
VLMETA_NAME = "__vlmeta__.b2f"
EMBED_NAME = "embed.b2e"
# python-blosc2's stores name a BatchArray's or ListArray's frame .b2b, and an ObjectArray's
# (or a plain super-chunk's) .b2f: frames of a tree that are no b2nd arrays (Tree.objects).
OBJECT_EXTS = (".b2b", SCHUNK_EXT)
# Files a tree may hold: frames, the embed store, chunk files of a sparse frame.
_BLOSC2_SUFFIXES = (".b2nd", ".b2f", ".b2b", ".b2frame", ".b2e", ".chunk")


# --- opening one frame ------------------------------------------------------------------------


def open_frame(
    urlpath,
    *,
    offset: int = 0,
    length: int | None = None,
    storage_options=None,
    dtype=None,
    limits: Limits | None = None,
):
    """Open the frame at byte ``offset`` of ``urlpath`` (``length`` bytes long, when known):
    a :class:`~b2store.B2ndArray`, or a :class:`~b2store.SChunk` for frames without the b2nd
    metalayer. ``limits`` bounds what the frame may ask for (see :func:`b2store.open`)."""
    options = dict(storage_options) if storage_options else None
    return api.open(urlpath, dtype=dtype, offset=offset, storage_options=options, limits=limits)


# --- references and trees ---------------------------------------------------------------------


@dataclass(frozen=True)
class ArrayRef:
    """Where one array of a tree lives, enough to reopen it anywhere (it pickles).

    Parameters
    ----------
    path : str
        The array's path in the tree, e.g. ``"/grp/lon"``.
    urlpath : str
        The file, sparse-frame directory or URL holding the frame.
    offset, length : int
        The frame's byte window in ``urlpath`` (a ``.b2z`` member); ``length`` None means to
        the end of the file.
    storage_options : dict, optional
        fsspec options for remote ``urlpath``.
    embedded : str, optional
        The key of a value embedded in the store's ``embed.b2e`` frame at ``urlpath``.
    limits : Limits, optional
        What the frame may ask for when opened (:class:`b2store.Limits`; its defaults when
        None). It travels with the reference, so a pickled one opens with the same limits.
    """

    path: str
    urlpath: str
    offset: int = 0
    length: int | None = None
    storage_options: dict | None = field(default=None, compare=False)
    embedded: str | None = None
    limits: Limits | None = field(default=None, compare=False)

    def open(self, dtype=None):
        """The array, opened for reading (a :class:`~b2store.B2ndArray`); ``dtype`` gives
        the item type of legacy caterva frames, which store none. A python-blosc2 container
        of variable-length items (BatchArray, ListArray, ObjectArray) raises
        :class:`~b2store.containers.ContainerNotArrayError` naming it: :meth:`open_object`
        opens one."""
        obj = self.open_object(dtype)
        if isinstance(obj, Container):
            kind = obj.kind
            obj.close()
            raise ContainerNotArrayError(kind, f"{self.urlpath}: {self.path}", self._how())
        if not isinstance(obj, B2ndArray):
            obj.close()
            raise FormatError(f"{self.path} frame", "the b2nd metalayer", "a plain super-chunk")
        return obj

    def _how(self) -> str:
        """How to read this frame with b2store, for a message."""
        if self.embedded is not None:
            tree = self.urlpath.removesuffix("/" + EMBED_NAME)
            return f"b2store.tree.open_tree({tree!r}).arrays()[{self.path!r}].open_object()[i]"
        if self.offset:
            return f"b2store.open({self.urlpath!r}, offset={self.offset})[i]"
        return f"b2store.open({self.urlpath!r})[i]"

    def open_object(self, dtype=None):
        """The frame, opened for reading as :func:`b2store.open` opens one: a
        :class:`~b2store.B2ndArray`, a python-blosc2 container (``BatchArray``, ``ListArray``,
        ``ObjectArray``) or a :class:`~b2store.SChunk`."""
        if self.embedded is None:
            obj = open_frame(
                self.urlpath,
                offset=self.offset,
                length=self.length,
                storage_options=self.storage_options,
                dtype=dtype,
                limits=self.limits,
            )
        else:
            obj = _open_embedded(self)
        return obj

    @cached_property
    def _summary(self) -> tuple:
        arr = self.open()
        try:
            return arr.shape, arr.dtype, arr.chunks, arr.blocks
        finally:
            arr.schunk.close()

    @property
    def shape(self) -> tuple[int, ...]:
        return self._summary[0]

    @property
    def dtype(self) -> np.dtype:
        return self._summary[1]

    @property
    def chunks(self) -> tuple[int, ...]:
        return self._summary[2]

    @property
    def blocks(self) -> tuple[int, ...]:
        return self._summary[3]


def _embedded_bytes(estore, entry: Mapping, limits: Limits | None = None) -> bytes:
    """The bytes of one value in an ``embed.b2e`` frame (a 1-d uint8 array or a super-chunk).

    A value is read whole into memory (it is a frame, opened from its bytes), so its length
    is bounded like one chunk, by ``limits.max_chunk_nbytes``; only the chunks holding it are
    decoded."""
    try:
        offset, length = int(entry["offset"]), int(entry["length"])
    except (KeyError, TypeError, ValueError):
        raise FormatError("embed_map entry", "integer offset and length", repr(entry)) from None
    total = estore.nbytes
    if not (0 <= offset and 0 <= length and offset + length <= total):
        raise FormatError("embed_map entry", f"a window inside {total} bytes", (offset, length))
    resolve(limits).check("max_chunk_nbytes", length, "embedded value length")
    if hasattr(estore, "shape"):
        return np.asarray(estore[offset : offset + length]).tobytes()
    if length == 0:
        return b""
    # Chunks of one size (what python-blosc2 writes): start at the first one holding the
    # value; otherwise walk from the start. Either way stop after the last one.
    chunksize = estore.chunksize
    i = offset // chunksize if chunksize > 0 else 0
    pos, end, parts = i * max(chunksize, 0), offset + length, []
    while pos < end and i < estore.nchunks:
        chunk = estore.decompress_chunk(i)
        lo, hi = max(offset - pos, 0), min(end - pos, chunk.nbytes)
        if hi > lo:
            parts.append(chunk.view(np.uint8).reshape(-1)[lo:hi].tobytes())
        pos += chunk.nbytes
        i += 1
    data = b"".join(parts)
    if len(data) != length:
        raise FormatError("embed.b2e chunks", f"{length} bytes at {offset}", len(data))
    return data


def _schunk(frame):
    """The SChunk of what :func:`open_frame` opened (an array's own, or itself)."""
    return frame.schunk if hasattr(frame, "schunk") else frame


@contextlib.contextmanager
def _opened(urlpath, offset: int, length: int | None, storage_options, limits):
    """:func:`open_frame` for a look inside: the frame, closed after."""
    frame = open_frame(
        urlpath, offset=offset, length=length, storage_options=storage_options, limits=limits
    )
    try:
        yield frame
    finally:
        _schunk(frame).close()


def _embed_map(estore) -> dict:
    meta = _schunk(estore).vlmeta.get("estore_metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("embed_map"), Mapping):
        return {}
    return dict(meta["embed_map"])


def _open_embedded(ref: ArrayRef):
    with _opened(ref.urlpath, ref.offset, ref.length, ref.storage_options, ref.limits) as estore:
        entry = _embed_map(estore).get(ref.embedded)
        if not isinstance(entry, Mapping) or "offset" not in entry:
            raise KeyError(f"{ref.embedded} is not embedded in {ref.urlpath}")
        data = _embedded_bytes(estore, entry, ref.limits)
    return api.open(data, limits=ref.limits)


class Tree:
    """The groups and arrays of a tree; see :func:`open_tree`.

    Attributes
    ----------
    kind : {"frame", "dir", "b2d", "b2z"}
        The layout.
    urlpath : str
        Where the tree is.
    limits : Limits or None
        What the tree and its frames may ask for (None: the defaults); its array references
        carry it.
    """

    def __init__(
        self, urlpath, *, storage_options: Mapping | None = None, limits: Limits | None = None
    ):
        resolve(limits)  # a TypeError now rather than at the first array opened
        self._files = TreeFiles(urlpath, storage_options)
        self.urlpath = self._files.urlpath
        self.storage_options = dict(storage_options) if storage_options else None
        self.limits = limits
        self._arrays: dict[str, ArrayRef] = {}
        self._objects: dict[str, ArrayRef] = {}
        # group path -> (urlpath, offset, length) of its __vlmeta__ frame, or None
        self._groups: dict[str, tuple | None] = {"/": None}
        self._attrs: dict[str, Mapping] | None = None
        # Files that are no Blosc2 frames (another writer's manifest): path -> zip member
        self._other: dict[str, Any] = {}
        files = self._files
        if not files.exists():
            raise FileNotFoundError(f"no tree at {urlpath}")
        if files.isdir():
            if files.exists(INDEX_NAME):
                self.kind = "frame"
                self._single_frame()
            else:
                if not files.remote and journal.pending(files.root):
                    journal.recover(files.root)  # a writer killed mid-commit: finish it
                is_store = self.urlpath.endswith(".b2d") or files.exists(EMBED_NAME)
                self.kind = "b2d" if is_store else "dir"
                foreign = self._list_directory()
                if foreign and not self._arrays:
                    # Files, none of them Blosc2 (a Zarr store, /etc): not an empty tree.
                    _refuse_directory(self.urlpath)
        else:
            size = files.size()
            head = files.read("", 0, min(FRAME_PREFIX_LENGTH, size))
            if head[:4] == b"PK\x03\x04" or self.urlpath.endswith(".b2z"):
                self.kind = "b2z"
                if self._list_zip() and not self._arrays:
                    _refuse(self.urlpath, "a zip file holding no Blosc2 frames")
            else:
                _check_frame_head(head, size, self.urlpath)
                self.kind = "frame"
                self._single_frame()

    def __repr__(self) -> str:
        return f"Tree({self.urlpath!r}, kind={self.kind!r}, arrays={len(self._arrays)})"

    def __reduce__(self):
        return (_reopen_tree, (self.urlpath, self.storage_options, self.limits))

    def _ref(self, path: str, rel: str, **kwargs) -> ArrayRef:
        return ArrayRef(
            path,
            self._files.join(rel),
            storage_options=self.storage_options,
            limits=self.limits,
            **kwargs,
        )

    def _check_members(self) -> None:
        resolve(self.limits).check(
            "max_tree_members", len(self._arrays) + len(self._groups), "tree arrays and groups"
        )

    def _add_group(self, path: str) -> None:
        # Depth first: zarr and xarray walk groups a stack frame a level, and the parents
        # below are made in time linear in the depth, not quadratic.
        path = "/" + path.strip("/")
        depth = path.count("/")
        limits = resolve(self.limits)
        if depth > limits.max_tree_depth:
            field = f"tree depth at {short_path(path)}"
            raise LimitError(field, "max_tree_depth", limits.max_tree_depth, depth)
        while path not in self._groups:
            self._groups[path] = None
            path = posixpath.dirname(path)
        self._check_members()

    def _add_array(self, path: str, ref: ArrayRef) -> None:
        if path in self._groups:
            raise FormatError("tree key", "a key that is a group or an array, not both", path)
        self._arrays[path] = ref
        self._check_members()
        parent = posixpath.dirname(path)
        if parent != "/":
            self._add_group(parent)

    def _single_frame(self) -> None:
        name = Path(self.urlpath.rstrip("/")).name
        stem = name.removesuffix(ARRAY_EXT).removesuffix(".b2frame") or "array"
        self._arrays["/" + stem] = self._ref("/" + stem, "")

    def _list_directory(self) -> bool:
        """List the frames below the directory; whether it holds files that are not Blosc2
        (besides hidden ones: locks, writers' temporaries)."""
        store = self.kind == "b2d"
        foreign = False
        for rel, dirs, files in self._files.walk(self.limits):
            prefix = "/" + rel if rel else ""
            for d in list(dirs):
                sub = f"{rel}/{d}" if rel else d
                if d.startswith("."):
                    dirs.remove(d)  # lock files' and writers' temporary directories
                elif self._files.exists(f"{sub}/{INDEX_NAME}"):
                    dirs.remove(d)  # a sparse frame: one array, not a group
                    path = prefix + "/" + d.removesuffix(ARRAY_EXT)
                    self._add_array(path, self._ref(path, sub))
            if rel:
                self._add_group(prefix)
            for name in files:
                sub = f"{rel}/{name}" if rel else name
                if name.endswith(ARRAY_EXT):
                    path = prefix + "/" + name[: -len(ARRAY_EXT)]
                    self._add_array(path, self._ref(path, sub))
                elif name.endswith(OBJECT_EXTS) and name != VLMETA_NAME:
                    path = prefix + "/" + name.rsplit(".", 1)[0]
                    self._objects[path] = self._ref(path, sub)
                elif store and name == VLMETA_NAME:
                    self._groups[prefix or "/"] = (self._files.join(sub), 0, None)
                elif store and name == EMBED_NAME and not rel:
                    self._list_embedded(self._files.join(sub), 0, None)
                elif not name.startswith(".") and not name.endswith(_BLOSC2_SUFFIXES):
                    foreign = True
                    self._other[sub] = None
        return foreign

    def _list_zip(self) -> bool:
        """List the frames stored in the zip; whether it holds members that are not Blosc2."""
        foreign = False
        for member in zip_members(self._files, self.limits):
            name = member.name
            base = posixpath.basename(name)
            dirname = posixpath.dirname(name)
            prefix = "/" + dirname if dirname else ""
            if base.endswith(OBJECT_EXTS) and base != VLMETA_NAME and member.method == STORED:
                path = prefix + "/" + base.rsplit(".", 1)[0]
                offset = member_data_offset(self._files, member)
                self._objects[path] = self._ref(path, "", offset=offset, length=member.size)
                continue
            if not (name.endswith(ARRAY_EXT) or base == VLMETA_NAME or name == EMBED_NAME):
                if dirname:
                    self._add_group(prefix)
                foreign = foreign or bool(base) and not base.startswith(".")
                self._other[name] = member
                continue
            if member.method != STORED:
                raise FormatError(
                    f"zip member {name!r} compression",
                    "stored (0): a frame is read where it lies; unzip it and open the directory",
                    f"deflated ({member.method})",
                )
            offset = member_data_offset(self._files, member)
            if name.endswith(ARRAY_EXT):
                path = prefix + "/" + base[: -len(ARRAY_EXT)]
                self._add_array(path, self._ref(path, "", offset=offset, length=member.size))
            elif base == VLMETA_NAME:
                if dirname:
                    self._add_group(prefix)
                self._groups[prefix or "/"] = (self.urlpath, offset, member.size)
            else:
                self._list_embedded(self.urlpath, offset, member.size)
        return foreign

    def _list_embedded(self, urlpath: str, offset: int, length: int | None) -> None:
        with _opened(urlpath, offset, length, self.storage_options, self.limits) as estore:
            embed_map = _embed_map(estore)
        for key, entry in sorted(embed_map.items()):
            if not isinstance(key, str) or not key.startswith("/"):
                continue
            if not isinstance(entry, Mapping) or "offset" not in entry:
                continue  # C2Array references and other non-frame values are not arrays here
            if key.endswith("/__vlmeta__"):
                continue
            ref = ArrayRef(
                key,
                urlpath,
                offset,
                length,
                storage_options=self.storage_options,
                embedded=key,
                limits=self.limits,
            )
            self._add_array(key, ref)

    def groups(self) -> dict[str, Mapping]:
        """Group path (``"/"``, ``"/grp"``) -> its attributes (read-only mappings)."""
        if self._attrs is None:
            attrs = {}
            for path, where in sorted(self._groups.items()):
                attrs[path] = MappingProxyType(self._read_attrs(where) if where else {})
            self._attrs = attrs
        return dict(self._attrs)

    def _read_attrs(self, where: tuple) -> dict:
        with _opened(*where, self.storage_options, self.limits) as frame:
            return dict(_schunk(frame).vlmeta)

    def arrays(self) -> dict[str, ArrayRef]:
        """Array path (``"/temp"``, ``"/grp/lon"``) -> a reference that opens it."""
        return dict(sorted(self._arrays.items()))

    def objects(self) -> dict[str, ArrayRef]:
        """The tree's frames that are no b2nd arrays (python-blosc2 names them ``.b2b``:
        BatchArray, ListArray; ``.b2f``: ObjectArray, plain super-chunks), path -> a
        reference whose :meth:`ArrayRef.open_object` opens one."""
        return dict(sorted(self._objects.items()))

    def check_objects(self, group: str | None = None) -> None:
        """Refuse what the tree's :meth:`objects` (all, or those directly in ``group``) hold
        that a reader of arrays must not pass over in silence: a python-blosc2 container
        (:class:`~b2store.containers.ContainerNotArrayError`, saying how to read it) or a
        proxy cache (:class:`~b2store.nd.carriers.DatalessObjectError`). Plain super-chunks
        pass: they are no arrays, and python-blosc2 stores keep their own metadata in them."""
        prefix = None if group is None else group.rstrip("/") + "/"
        for path, ref in self.objects().items():
            if prefix is not None and not (
                path.startswith(prefix) and "/" not in path[len(prefix) :]
            ):
                continue
            obj = ref.open_object()  # a proxy cache raises here
            _schunk(obj).close()
            if isinstance(obj, Container):
                raise ContainerNotArrayError(obj.kind, f"{ref.urlpath}: {path}", ref._how())

    def files(self) -> list[str]:
        """The tree's files that are no Blosc2 frames (another writer's ``dataset.json``),
        as posix paths relative to its root, hidden ones left out."""
        return sorted(self._other)

    def read_file(self, name: str) -> bytes:
        """The bytes of one of :meth:`files`, read whole into memory: at most
        ``limits.max_member_nbytes`` (a deflated ``.b2z`` member is inflated no further,
        whatever its header says)."""
        if name not in self._other:
            raise KeyError(f"no file {name!r} besides the frames of {self.urlpath}")
        member = self._other[name]
        if member is not None:
            return read_member(self._files, member, self.limits)
        size = self._files.size(name)
        resolve(self.limits).check("max_member_nbytes", size, f"{name} bytes")
        return self._files.read(name, 0, size)


def _check_frame_head(head: bytes, size: int, urlpath: str) -> None:
    """A single file that is not a zip must begin as a frame: another format is refused here,
    named, rather than listed as a one-array tree that fails when the array is opened."""
    try:
        FrameHeader.peek_len(head)
    except NotBlosc2Error as exc:
        raise exc.named(urlpath, head, size) from None
    except FormatError:
        pass  # a frame, damaged or cut short: opening its array names the field


def _refuse_directory(urlpath: str) -> None:
    what = None if is_url(urlpath) else looks_like_directory(urlpath)
    if what is None or not what.startswith("a Zarr store"):
        what = "a directory holding no Blosc2 frames"
    _refuse(urlpath, what)


def _refuse(urlpath: str, what: str) -> None:
    """``urlpath`` is no tree: ``what`` it is instead."""
    raise NotBlosc2Error(what, "tree", "Blosc2 frames, a .b2d or a .b2z", "none").named(urlpath)


def _reopen_tree(urlpath, storage_options, limits=None):
    return Tree(urlpath, storage_options=storage_options, limits=limits)


def open_tree(
    path, *, storage_options: Mapping | None = None, limits: Limits | None = None
) -> Tree:
    """List the groups and arrays at ``path``: a ``.b2nd`` frame, a sparse-frame directory,
    a directory of ``.b2nd`` files, a ``.b2d`` directory or a ``.b2z`` file (local or an
    fsspec URL, with ``storage_options``).

    ``limits`` (:class:`b2store.Limits`; the defaults when None) bounds the number of members
    a tree may list (``max_tree_members``) and what each frame in it may ask for when opened:
    the tree and its array references carry it, pickled too. A tree or frame asking for more
    raises :class:`b2store.LimitError`.

    >>> import numpy as np, b2store, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> _ = b2store.asarray(np.arange(6), os.path.join(d, "x.b2nd"))
    >>> tree = open_tree(d)
    >>> tree.kind, list(tree.arrays()), tree.arrays()["/x"].open()[2:4]
    ('dir', ['/x'], array([2, 3]))
    """
    return Tree(path, storage_options=storage_options, limits=limits)
