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
  (``header offset + 30 + name length + extra length``);
- a single frame (file or sparse-frame directory): one array named after the file.

Listing reads directory entries or the zip's central directory, never array data.
"""

from __future__ import annotations

import os
import posixpath
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from .errors import FormatError

__all__ = ["open_tree", "Tree", "ArrayRef", "open_frame", "is_url"]

ARRAY_EXT = ".b2nd"
SCHUNK_EXT = ".b2f"
VLMETA_NAME = "__vlmeta__.b2f"
EMBED_NAME = "embed.b2e"
SPARSE_INDEX = "chunks.b2frame"
#: Central-directory entries a .b2z may list (a bound on what listing allocates).
MAX_ZIP_ENTRIES = 1_000_000


def is_url(urlpath) -> bool:
    """Whether ``urlpath`` names a remote (fsspec) location rather than a local path."""
    return isinstance(urlpath, str) and "://" in urlpath and not urlpath.startswith("file://")


# --- bytes of local files or fsspec URLs ------------------------------------------------------


class _Files:
    """Sizes, byte ranges and listings under one root, local or behind an fsspec URL."""

    def __init__(self, urlpath, storage_options: Mapping | None = None):
        self.remote = is_url(urlpath)
        self.storage_options = dict(storage_options or {})
        if self.remote:
            import fsspec

            self.fs, self.root = fsspec.core.url_to_fs(urlpath, **self.storage_options)
            self.root = self.root.rstrip("/")
            self.urlpath = urlpath.rstrip("/")
        else:
            # Absolute: references must reopen from any working directory (or process).
            self.root = Path(os.fspath(urlpath).removeprefix("file://")).expanduser().absolute()
            self.urlpath = str(self.root)

    def join(self, rel: str) -> str:
        """The full path or URL of ``rel`` (posix) under the root."""
        if not rel:
            return self.urlpath
        return f"{self.urlpath}/{rel}" if self.remote else str(self.root / rel)

    def _fspath(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def isdir(self, rel: str = "") -> bool:
        if self.remote:
            path = self._fspath(rel)
            if "http" in self.fs.protocol and not path.endswith(("/", ".b2d")):
                return False  # an HTTP "directory" test downloads the page to list links
            return self.fs.isdir(path)
        return (self.root / rel).is_dir()

    def exists(self, rel: str = "") -> bool:
        if self.remote:
            # info() (a HEAD over HTTP), not exists(), which GETs the whole file there.
            try:
                self.fs.info(self._fspath(rel))
            except (FileNotFoundError, OSError):
                return False
            return True
        return (self.root / rel).exists()

    def size(self, rel: str = "") -> int:
        if self.remote:
            return int(self.fs.size(self._fspath(rel)))
        return (self.root / rel).stat().st_size

    def read(self, rel: str, start: int, size: int) -> bytes:
        if size <= 0:
            return b""
        if self.remote:
            data = self.fs.cat_file(self._fspath(rel), start=start, end=start + size)
        else:
            with open(self.root / rel, "rb") as fh:
                data = os.pread(fh.fileno(), size, start)
        if len(data) != size:
            raise FormatError(rel or "file", f"{size} bytes at {start}", f"{len(data)} bytes")
        return data

    def walk(self) -> Iterator[tuple[str, list[str], list[str]]]:
        """``(relative dir, subdirectory names, file names)``, top down, links not followed."""
        if self.remote:
            base = self.root
            for dirpath, dirs, files in self.fs.walk(base):
                rel = dirpath[len(base) :].strip("/") if dirpath.startswith(base) else ""
                yield rel, sorted(dirs), sorted(files)
            return
        for dirpath, dirs, files in os.walk(self.root):
            dirs.sort()
            rel = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            yield ("" if rel == "." else rel), dirs, sorted(files)


# --- opening one frame ------------------------------------------------------------------------


def open_frame(
    urlpath, *, offset: int = 0, length: int | None = None, storage_options=None, dtype=None
):
    """Open the frame at byte ``offset`` of ``urlpath`` (``length`` bytes long, when known):
    a :class:`~b2store.B2ndArray`, or a :class:`~b2store.SChunk` for frames without the b2nd
    metalayer."""
    from . import api

    kwargs: dict[str, Any] = {} if dtype is None else {"dtype": dtype}
    if storage_options:
        kwargs["storage_options"] = dict(storage_options)
    return api.open(urlpath, offset=offset, **kwargs)


# --- .b2z central directory -------------------------------------------------------------------

_EOCD = struct.Struct("<IHHHHIIH")
_EOCD64_LOCATOR = struct.Struct("<IIQI")
_EOCD64 = struct.Struct("<IQHHIIQQQQ")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_LOCAL = struct.Struct("<IHHHHHIIIHH")


@dataclass(frozen=True)
class _Member:
    name: str
    header_offset: int
    size: int


def _safe_member_name(name: str) -> str:
    """A member name that stays inside the tree: relative, no ``..``, no odd characters."""
    parts = name.split("/")
    if (
        not name
        or name.startswith("/")
        or "\\" in name
        or any(c in name for c in "\0\n\r\t:")
        or any(p in ("", ".", "..") for p in parts[:-1])
        or parts[-1] in (".", "..")
    ):
        raise FormatError("zip member name", "a relative path inside the tree", repr(name))
    return name


def _zip_members(files: _Files) -> list[_Member]:
    """The members of a zip file, read from its central directory (a few range reads)."""
    size = files.size()
    # Most zips have no comment: the end record is the last 22 bytes (one small read).
    tail_len = min(size, _EOCD.size + _EOCD64_LOCATOR.size)
    tail = files.read("", size - tail_len, tail_len)
    if tail[-_EOCD.size : -_EOCD.size + 4] != b"PK\x05\x06":
        tail_len = min(size, _EOCD.size + 0xFFFF + _EOCD64_LOCATOR.size)
        tail = files.read("", size - tail_len, tail_len)
    at = tail.rfind(b"PK\x05\x06", 0, max(0, len(tail) - _EOCD.size + 4))
    # (an end record is whole, its comment too; a file shorter than one has none)
    while at >= 0 and (
        at + _EOCD.size > len(tail)
        or at + _EOCD.size + struct.unpack_from("<H", tail, at + 20)[0] > len(tail)
    ):
        at = tail.rfind(b"PK\x05\x06", 0, at)
    if at < 0:
        raise FormatError(".b2z end of central directory", "a zip file", "no zip signature")
    eocd_pos = size - tail_len + at
    _, _, _, _, count, cd_size, cd_offset, _ = _EOCD.unpack_from(tail, at)
    cd_end = eocd_pos
    if (count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF) and at >= 20:
        sig, _, eocd64_pos, _ = _EOCD64_LOCATOR.unpack_from(tail, at - 20)
        if sig == 0x07064B50:
            if not 0 <= eocd64_pos <= size - _EOCD64.size:
                raise FormatError("zip64 end of central directory", "inside the file", eocd64_pos)
            rec = _EOCD64.unpack(files.read("", eocd64_pos, _EOCD64.size))
            if rec[0] != 0x06064B50:
                raise FormatError("zip64 end of central directory", "its signature", hex(rec[0]))
            count, cd_size, cd_offset = rec[7], rec[8], rec[9]
            cd_end = eocd64_pos
    if cd_offset + cd_size != cd_end:
        raise FormatError(
            "zip central directory",
            f"ending where the end record starts ({cd_end})",
            cd_offset + cd_size,
            eocd_pos,
        )
    if count > MAX_ZIP_ENTRIES or count * _CENTRAL.size > cd_size:
        raise FormatError("zip entries", f"at most {cd_size // _CENTRAL.size}", count, eocd_pos)
    cd = files.read("", cd_offset, cd_size)
    members, pos = [], 0
    for _ in range(count):
        if pos + _CENTRAL.size > len(cd):
            raise FormatError(
                "zip central directory", "a whole entry", "truncated", cd_offset + pos
            )
        fields = _CENTRAL.unpack_from(cd, pos)
        sig, flags, method, csize, usize = fields[0], fields[3], fields[4], fields[8], fields[9]
        name_len, extra_len, comment_len, header_offset = (
            fields[10],
            fields[11],
            fields[12],
            fields[16],
        )
        if sig != 0x02014B50:
            raise FormatError(
                "zip central directory entry", "signature PK\\1\\2", hex(sig), cd_offset + pos
            )
        start = pos + _CENTRAL.size
        end = start + name_len + extra_len + comment_len
        if end > len(cd):
            raise FormatError(
                "zip central directory", "a whole entry", "truncated", cd_offset + pos
            )
        raw_name = cd[start : start + name_len]
        try:
            name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
        except UnicodeDecodeError:
            raise FormatError(
                "zip member name", "UTF-8 (flag bit 11 is set)", bytes(raw_name), cd_offset + pos
            ) from None
        extra = cd[start + name_len : start + name_len + extra_len]
        usize, csize, header_offset = _zip64_sizes(extra, usize, csize, header_offset)
        pos = end
        if name.endswith("/"):
            continue  # a directory entry
        if flags & 0x1:
            raise FormatError(f"zip member {name!r}", "not encrypted", "encrypted")
        if method != 0:
            raise FormatError(
                f"zip member {name!r} compression",
                "stored (0): a .b2z is read in place; unzip it and open the directory",
                method,
            )
        if csize != usize:
            raise FormatError(f"zip member {name!r} size", f"{usize} (stored)", csize)
        members.append(_Member(_safe_member_name(name), header_offset, usize))
    # Members may not overlap each other or the central directory (the classic zip bomb).
    spans = sorted(
        (m.header_offset, m.header_offset + _LOCAL.size + m.size, m.name) for m in members
    )
    last_end = 0
    for begin, end, name in spans:
        if begin < last_end or end > cd_offset:
            raise FormatError(
                f"zip member {name!r}", "a span of its own before the directory", begin
            )
        last_end = end
    if len({m.name for m in members}) != len(members):
        raise FormatError("zip member names", "unique", "a duplicate")
    return members


def _zip64_sizes(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4 : pos + 4 + size]
        if tag == 0x0001:
            values = list(struct.unpack_from(f"<{len(body) // 8}Q", body)) if len(body) >= 8 else []
            if usize == 0xFFFFFFFF and values:
                usize = values.pop(0)
            if csize == 0xFFFFFFFF and values:
                csize = values.pop(0)
            if offset == 0xFFFFFFFF and values:
                offset = values.pop(0)
        pos += 4 + size
    return usize, csize, offset


def _member_data_offset(files: _Files, member: _Member) -> int:
    """Where a stored member's bytes start: after its local header, name and extra field."""
    head = files.read("", member.header_offset, _LOCAL.size)
    fields = _LOCAL.unpack(head)
    if fields[0] != 0x04034B50:
        raise FormatError(f"zip member {member.name!r}", "local header PK\\3\\4", hex(fields[0]))
    name_len, extra_len = fields[9], fields[10]
    name = files.read("", member.header_offset + _LOCAL.size, name_len)
    if name.decode("utf-8", "replace") != member.name and name.decode("cp437") != member.name:
        raise FormatError(f"zip member {member.name!r}", "the same name in its local header", name)
    return member.header_offset + _LOCAL.size + name_len + extra_len


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
    """

    path: str
    urlpath: str
    offset: int = 0
    length: int | None = None
    storage_options: dict | None = field(default=None, compare=False)
    embedded: str | None = None

    def open(self, dtype=None):
        """The array, opened for reading (a :class:`~b2store.B2ndArray`); ``dtype`` gives
        the item type of legacy caterva frames, which store none."""
        from .nd.array import B2ndArray

        if self.embedded is None:
            obj = open_frame(
                self.urlpath,
                offset=self.offset,
                length=self.length,
                storage_options=self.storage_options,
                dtype=dtype,
            )
        else:
            obj = _open_embedded(self)
        if not isinstance(obj, B2ndArray):
            obj.close()
            raise FormatError(f"{self.path} frame", "the b2nd metalayer", "a plain super-chunk")
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


def _embedded_bytes(estore, entry: Mapping) -> bytes:
    """The bytes of one value in an ``embed.b2e`` frame (a 1-d uint8 array or a super-chunk)."""
    offset, length = int(entry["offset"]), int(entry["length"])
    total = estore.nbytes if hasattr(estore, "shape") else estore.nbytes
    if not (0 <= offset and 0 <= length and offset + length <= total):
        raise FormatError("embed_map entry", f"a window inside {total} bytes", (offset, length))
    if hasattr(estore, "shape"):
        return np.asarray(estore[offset : offset + length]).tobytes()
    data = b"".join(estore.decompress_chunk(i).tobytes() for i in range(estore.nchunks))
    return data[offset : offset + length]


def _embed_map(estore) -> dict:
    schunk = estore.schunk if hasattr(estore, "schunk") else estore
    meta = schunk.vlmeta.get("estore_metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("embed_map"), Mapping):
        return {}
    return dict(meta["embed_map"])


def _open_embedded(ref: ArrayRef):
    from . import api

    estore = open_frame(
        ref.urlpath, offset=ref.offset, length=ref.length, storage_options=ref.storage_options
    )
    try:
        entry = _embed_map(estore).get(ref.embedded)
        if entry is None or "offset" not in entry:
            raise KeyError(f"{ref.embedded} is not embedded in {ref.urlpath}")
        data = _embedded_bytes(estore, entry)
    finally:
        (estore.schunk if hasattr(estore, "schunk") else estore).close()
    return api.open(data)


class Tree:
    """The groups and arrays of a tree; see :func:`open_tree`.

    Attributes
    ----------
    kind : {"frame", "dir", "b2d", "b2z"}
        The layout.
    urlpath : str
        Where the tree is.
    """

    def __init__(self, urlpath, *, storage_options: Mapping | None = None):
        self._files = _Files(urlpath, storage_options)
        self.urlpath = self._files.urlpath
        self.storage_options = dict(storage_options) if storage_options else None
        self._arrays: dict[str, ArrayRef] = {}
        # group path -> (urlpath, offset, length) of its __vlmeta__ frame, or None
        self._groups: dict[str, tuple | None] = {"/": None}
        self._attrs: dict[str, Mapping] | None = None
        files = self._files
        if not files.exists():
            raise FileNotFoundError(f"no tree at {urlpath}")
        if files.isdir():
            if files.exists(SPARSE_INDEX):
                self.kind = "frame"
                self._single_frame()
            else:
                is_store = self.urlpath.endswith(".b2d") or files.exists(EMBED_NAME)
                self.kind = "b2d" if is_store else "dir"
                self._list_directory()
        else:
            head = files.read("", 0, min(4, files.size()))
            if head == b"PK\x03\x04" or self.urlpath.endswith(".b2z"):
                self.kind = "b2z"
                self._list_zip()
            else:
                self.kind = "frame"
                self._single_frame()

    def __repr__(self) -> str:
        return f"Tree({self.urlpath!r}, kind={self.kind!r}, arrays={len(self._arrays)})"

    def __reduce__(self):
        return (_reopen_tree, (self.urlpath, self.storage_options))

    def _ref(self, path: str, rel: str, **kwargs) -> ArrayRef:
        return ArrayRef(path, self._files.join(rel), storage_options=self.storage_options, **kwargs)

    def _add_group(self, path: str) -> None:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            self._groups.setdefault("/" + "/".join(parts[:i]), None)

    def _add_array(self, path: str, ref: ArrayRef) -> None:
        if path in self._groups:
            raise FormatError("tree key", "a key that is a group or an array, not both", path)
        self._arrays[path] = ref
        parent = posixpath.dirname(path)
        if parent != "/":
            self._add_group(parent)

    def _single_frame(self) -> None:
        name = Path(self.urlpath.rstrip("/")).name
        stem = name.removesuffix(ARRAY_EXT).removesuffix(".b2frame") or "array"
        self._arrays["/" + stem] = self._ref("/" + stem, "")

    def _list_directory(self) -> None:
        store = self.kind == "b2d"
        for rel, dirs, files in self._files.walk():
            prefix = "/" + rel if rel else ""
            for d in list(dirs):
                sub = f"{rel}/{d}" if rel else d
                if d.startswith("."):
                    dirs.remove(d)  # lock files' and writers' temporary directories
                elif self._files.exists(f"{sub}/{SPARSE_INDEX}"):
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
                elif store and name == VLMETA_NAME:
                    self._groups[prefix or "/"] = (self._files.join(sub), 0, None)
                elif store and name == EMBED_NAME and not rel:
                    self._list_embedded(self._files.join(sub), 0, None)

    def _list_zip(self) -> None:
        for member in _zip_members(self._files):
            name = member.name
            base = posixpath.basename(name)
            dirname = posixpath.dirname(name)
            prefix = "/" + dirname if dirname else ""
            if not (name.endswith(ARRAY_EXT) or base == VLMETA_NAME or name == EMBED_NAME):
                if dirname:
                    self._add_group(prefix)
                continue
            offset = _member_data_offset(self._files, member)
            if name.endswith(ARRAY_EXT):
                path = prefix + "/" + base[: -len(ARRAY_EXT)]
                self._add_array(path, self._ref(path, "", offset=offset, length=member.size))
            elif base == VLMETA_NAME:
                if dirname:
                    self._add_group(prefix)
                self._groups[prefix or "/"] = (self.urlpath, offset, member.size)
            else:
                self._list_embedded(self.urlpath, offset, member.size)

    def _list_embedded(self, urlpath: str, offset: int, length: int | None) -> None:
        estore = open_frame(
            urlpath, offset=offset, length=length, storage_options=self.storage_options
        )
        try:
            embed_map = _embed_map(estore)
        finally:
            (estore.schunk if hasattr(estore, "schunk") else estore).close()
        for key, entry in sorted(embed_map.items()):
            if not isinstance(key, str) or not key.startswith("/") or "offset" not in entry:
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
        urlpath, offset, length = where
        frame = open_frame(
            urlpath, offset=offset, length=length, storage_options=self.storage_options
        )
        schunk = frame.schunk if hasattr(frame, "schunk") else frame
        try:
            return dict(schunk.vlmeta)
        finally:
            schunk.close()

    def arrays(self) -> dict[str, ArrayRef]:
        """Array path (``"/temp"``, ``"/grp/lon"``) -> a reference that opens it."""
        return dict(sorted(self._arrays.items()))


def _reopen_tree(urlpath, storage_options):
    return Tree(urlpath, storage_options=storage_options)


def open_tree(path, *, storage_options: Mapping | None = None) -> Tree:
    """List the groups and arrays at ``path``: a ``.b2nd`` frame, a sparse-frame directory,
    a directory of ``.b2nd`` files, a ``.b2d`` directory or a ``.b2z`` file (local or an
    fsspec URL, with ``storage_options``).

    >>> import numpy as np, b2store, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> _ = b2store.asarray(np.arange(6), os.path.join(d, "x.b2nd"))
    >>> tree = open_tree(d)
    >>> tree.kind, list(tree.arrays()), tree.arrays()["/x"].open()[2:4]
    ('dir', ['/x'], array([2, 3]))
    """
    return Tree(path, storage_options=storage_options)
