"""The ``b2nd`` xarray engine: Blosc2 frames and trees opened as lazy, CF-decoded Datasets.

Layout conventions (written by :func:`b2store.to_b2nd`, read from anything):

- each variable is one b2nd frame; its vlmeta key ``_ARRAY_DIMENSIONS`` names the dimensions
  (as xarray-on-Zarr-v2 does; ``dim_0``, ``dim_1``, ... when absent), every other plain key
  is an attribute, CF ones included (``units``, ``_FillValue``, ``scale_factor``, ...);
- the namespaced key ``_xarray`` holds what plain attributes cannot say: the variable's name,
  the NumPy types of attributes, and, in a single-frame Dataset, the Dataset's attributes and
  its (small) coordinates;
- a tree (``.b2d`` directory, ``.b2z`` zip, or a directory of frames, python-blosc2's
  TreeStore layout) holds one frame per variable at its path and each group's attributes in
  the vlmeta of ``<group>/__vlmeta__.b2f``.

This module sniffs paths and is the entry point; the lazy arrays and the openers they pickle
as are :mod:`.lazy`, the Datasets of frames and groups :mod:`.groups`.
"""

from __future__ import annotations

import os
import posixpath
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from xarray import Dataset
from xarray.backends.common import (
    BackendEntrypoint,
    _normalize_path,
    datatree_from_dict_with_io_cleanup,
)

from ... import _files
from ...errors import FormatError
from ...limits import Limits, resolve
from ...table.reader import Table, is_table
from ...tree import open_frame, open_tree
from .blosc2_layout import refuse_shards, xb2_tree_dataset
from .foreign import (
    SEALED_MARKER,
    ForeignLayoutError,
    foreign_layout,
    foreign_vlmeta,
    owner_engine_installed,
)
from .groups import ancestor_sizes, frame_dataset, group_dataset
from .tables import TableRecipe, table_dataset

__all__ = ["B2ndBackendEntrypoint"]

EXTENSIONS = (".b2nd", ".b2frame", ".b2f", ".b2d", ".b2z")
_MAGIC = b"\xa8b2frame\x00"  # bytes 1..10 of every frame (after a msgpack array marker)


# --- sniffing ----------------------------------------------------------------------------------


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _has_magic(path: Path) -> bool:
    try:  # (a FIFO or a device is not a frame: never opened so that it could block)
        with open(_files.open_regular(path), "rb") as fh:
            head = fh.read(10)
    except (OSError, FormatError):
        return False
    return len(head) == 10 and head[1:10] == _MAGIC


def _classify(path: str) -> str | None:
    """``"frame"`` for a contiguous or sparse frame, ``"tree"`` for a tree, else None."""
    stripped = path.rstrip("/")
    suffix = os.path.splitext(stripped)[1].lower()
    if _is_remote(path):
        if suffix in (".b2d", ".b2z"):
            return "tree"
        return "frame" if suffix in EXTENSIONS else None
    p = Path(stripped.removeprefix("file://")).expanduser()
    if p.is_dir():
        if (p / "chunks.b2frame").is_file():
            return "frame"
        if (p / "embed.b2e").is_file() or (p / "__vlmeta__.b2f").is_file() or suffix == ".b2d":
            return "tree"
        # A directory of frames (or of sparse frames) is a tree too.
        if any(c.suffix == ".b2nd" or (c / "chunks.b2frame").is_file() for c in p.iterdir()):
            return "tree"
        return None
    if p.is_file():
        if suffix == ".b2z" or _is_zip(p):
            return "tree" if suffix in (".b2z", "") else None
        return "frame" if _has_magic(p) else None
    return None


def _foreign_frame(path: str) -> bool:
    """Whether a local frame's vlmeta are another writer's (xarray-blosc2's) variable; for a
    directory of frames that is no python-blosc2 tree, its first frame's."""
    kind = _classify(path)
    p = Path(path.rstrip("/").removeprefix("file://")).expanduser()
    if kind == "tree" and p.is_dir() and not (p / "embed.b2e").exists():
        path = next((str(c) for c in sorted(p.glob("*.b2nd")) if _classify(str(c))), "")
        kind = "frame" if path else None
    if kind != "frame":
        return False
    try:
        arr = open_frame(path)
    except Exception:  # guessing only: opening reports what is wrong
        return False
    try:
        return foreign_vlmeta(arr.vlmeta) is not None  # decodes only the keys it looks at
    except Exception:
        return False
    finally:
        getattr(arr, "schunk", arr).close()


def _is_zip(path: Path) -> bool:
    try:
        with open(_files.open_regular(path), "rb") as fh:
            return fh.read(4) == b"PK\x03\x04"
    except (OSError, FormatError):
        return False


# --- the engine --------------------------------------------------------------------------------


def _with_options(body):
    """The engine's opener that calls ``body(self, opening)``: open_dataset and
    open_groups_as_dict take the same options, written once here (xarray reads them from
    ``open_dataset``'s signature: it stays what it was), and both open what they are given
    the same way (:class:`_Opening`)."""

    def opener(
        self,
        filename_or_obj,
        *,
        drop_variables: str | Iterable[str] | None = None,
        mask_and_scale=True,
        decode_times=True,
        concat_characters=True,
        decode_coords=True,
        use_cftime=None,
        decode_timedelta=None,
        group: str | None = None,
        storage_options: Mapping | None = None,
        lock=None,
        limits: Limits | None = None,
        variable_name: str | None = None,
    ):
        return body(self, _Opening(filename_or_obj, locals()))

    opener.__name__ = body.__name__.lstrip("_")
    opener.__qualname__ = body.__qualname__.replace("._", ".")
    opener.__doc__ = body.__doc__
    opener.__annotations__["return"] = body.__annotations__["return"]
    return opener


#: The arguments of the engine's openers that are CF decoding settings (in the order xarray
#: lists them in ``open_dataset_parameters``).
_DECODERS = (
    "drop_variables",
    "mask_and_scale",
    "decode_times",
    "concat_characters",
    "decode_coords",
    "use_cftime",
    "decode_timedelta",
)


class _Opening:
    """What an opener was asked to open and how, checked before anything is opened: the
    path, whether it is in xarray-blosc2's layout, whether it is a "frame" or a "tree", the
    CF decoding settings and the other options; and the openings both openers share."""

    def __init__(self, filename_or_obj, options: Mapping):
        self.decoders = {k: options[k] for k in _DECODERS}
        self.group = options["group"]
        self.storage_options = options["storage_options"]
        self.limits = options["limits"]
        self.variable_name = options["variable_name"]
        self.given_lock = options["lock"]
        self.path, self.xb2, self.kind = _what_to_open(
            filename_or_obj, self.limits, self.variable_name
        )
        self.lock = _lock_of(self.given_lock)

    def frame(self) -> Dataset:
        """The single frame at the path as a Dataset."""
        return frame_dataset(
            self.path, self.storage_options, self.lock, self.decoders, self.limits,
            self.variable_name,
        )  # fmt: skip

    def tree(self):
        """The tree at the path, opened."""
        return _open_tree(self.path, self.storage_options, self.limits, self.variable_name)

    def table(self, tree, node: str) -> Dataset:
        """The python-blosc2 CTable at ``node`` of ``tree``."""
        return _table_dataset(
            tree, self.path, node, self.storage_options, self.limits, self.given_lock,
            self.decoders,
        )  # fmt: skip


class B2ndBackendEntrypoint(BackendEntrypoint):
    """Open Blosc2 b2nd frames (``.b2nd``, ``.b2frame``, sparse-frame directories) and trees
    (``.b2d``, ``.b2z``, directories of frames) with ``xr.open_dataset(path, engine="b2nd")``.

    Backend options: ``group`` (a tree's group path), ``storage_options`` (fsspec options for
    URLs, and b2store's ``read_timeout``: seconds a request may go without a byte, 60),
    ``lock`` (a lock held around each read; reads are positional, so None by default),
    ``limits`` (a :class:`b2store.Limits`: what the files may ask for, carried by the
    Dataset's lazy arrays into pickles and dask workers; the defaults when None),
    ``variable_name`` (the name of a single frame's array when the frame stores none, as
    python-blosc2's ``asarray`` files do; ``"data"`` when None, whatever the file is called,
    so that ``xr.open_mfdataset`` over a series of such files combines one variable; a name
    ``to_b2nd`` stored is always used).
    """

    description = "Open Blosc2 b2nd frames and .b2d/.b2z trees in xarray (b2store)"
    url = "https://github.com/b2store/b2store/blob/main/docs/xarray.md"
    supports_groups = True
    open_dataset_parameters = (
        "filename_or_obj",
        *_DECODERS,
        "group",
        "storage_options",
        "lock",
        "limits",
        "variable_name",
    )

    def guess_can_open(self, filename_or_obj) -> bool:
        if isinstance(filename_or_obj, (str, os.PathLike)):
            path = os.fspath(filename_or_obj)
            if not isinstance(path, str):
                return False
            # xarray-blosc2's layout is claimed only where its own engine is not installed:
            # xarray asks engines in alphabetical order, b2nd before blosc2, and the engine
            # of the writer reads its files first (its sealed blob is for it alone).
            if not _is_remote(path):
                marker = foreign_layout(path)
                if marker == SEALED_MARKER:
                    return False
                if marker or _foreign_frame(path):
                    return not owner_engine_installed()
            if os.path.splitext(path.rstrip("/"))[1].lower() in EXTENSIONS:
                return True
            return _classify(path) is not None
        return False

    def _open_dataset(self, opening: _Opening) -> Dataset:
        path, decoders, lock, group = opening.path, opening.decoders, opening.lock, opening.group
        if opening.kind == "frame":
            if group not in (None, "", "/"):
                raise ValueError(f"a single frame has no groups; group={group!r}")
            return opening.frame()
        tree = opening.tree()
        node = _group_path(group)
        if opening.xb2:
            return _xb2_dataset(tree, path, node, lock, decoders)
        if node not in tree.groups():
            raise KeyError(f"no group {node!r} in {path}; groups: {sorted(tree.groups())}")
        if is_table(tree, node):
            return opening.table(tree, node)
        sizes = ancestor_sizes(tree, node)
        try:
            return group_dataset(tree, path, node, lock, decoders, sizes)
        except ForeignLayoutError:
            # Frames in xarray-blosc2's layout without its manifest or coordinate files (or
            # behind a URL, where the files are not sniffed).
            if node != "/":
                raise
            return _xb2_dataset(tree, path, node, lock, decoders)

    def _open_groups_as_dict(self, opening: _Opening) -> dict[str, Dataset]:
        path, decoders, lock = opening.path, opening.decoders, opening.lock
        if opening.kind == "frame":
            return {"/": opening.frame()}
        tree = opening.tree()
        root = _group_path(opening.group)
        if opening.xb2:
            return {"/": _xb2_dataset(tree, path, root, lock, decoders)}
        out, sizes, tables = {}, {}, []
        for node in sorted(tree.groups()):
            if any(node.startswith(t.rstrip("/") + "/") for t in tables):
                continue  # a table's insides: its columns are the table's variables
            if is_table(tree, node) and (node == root or node.startswith(root.rstrip("/") + "/")):
                rel = "/" + node[len(root) :].strip("/") if root != "/" else node
                out[rel] = opening.table(tree, node)
                tables.append(node)
                continue
            if node == root or node.startswith(root.rstrip("/") + "/"):
                rel = "/" + node[len(root) :].strip("/") if root != "/" else node
                # A child sees its parent's dimensions (DataTree aligns them).
                sizes[node] = dict(sizes.get(posixpath.dirname(node.rstrip("/")) or "/", {}))
                if node == root:
                    sizes[node] = {}
                try:
                    out[rel] = group_dataset(tree, path, node, lock, decoders, sizes[node])
                except ForeignLayoutError:
                    if node != "/" or len(tree.groups()) > 1:
                        raise
                    return {"/": _xb2_dataset(tree, path, root, lock, decoders)}
        if not out:
            raise KeyError(f"no group {root!r} in {path}")
        return out

    open_dataset = _with_options(_open_dataset)
    open_groups_as_dict = _with_options(_open_groups_as_dict)

    def open_datatree(self, filename_or_obj, **kwargs):
        groups = self.open_groups_as_dict(filename_or_obj, **kwargs)
        return datatree_from_dict_with_io_cleanup(groups)


def _what_to_open(filename_or_obj, limits, variable_name) -> tuple[str, bool, str]:
    """The path an opener was given, whether it is in xarray-blosc2's layout, and whether
    it is a "frame" or a "tree"; the options checked first, before anything is opened."""
    resolve(limits)  # a TypeError before anything is opened
    _check_variable_name(variable_name)
    path = _path_of(filename_or_obj)
    xb2 = _xb2_layout(path)  # its markers are a directory's or a zip's: a tree
    if xb2:
        refuse_shards(path)
    return path, xb2, "tree" if xb2 else _classify(path) or _kind_by_suffix(path)


def _open_tree(path: str, storage_options, limits, variable_name):
    # A tree's arrays are named by their paths in it: a name given for them would be ignored.
    if variable_name is not None:
        raise ValueError(
            f"variable_name names the array of a single frame; {path} is a tree, whose "
            "arrays are named by their paths in it"
        )
    return open_tree(path, storage_options=storage_options, limits=limits)


def _xb2_layout(path: str) -> bool:
    """Whether a local ``path`` is in xarray-blosc2's layout (its files say so; behind a URL
    its frames' vlmeta do, when opened); its sealed (encrypted) blob is refused here."""
    if _is_remote(path):
        return False
    marker = foreign_layout(path)
    if marker == SEALED_MARKER:
        raise ForeignLayoutError(path, marker)
    return marker is not None


def _table_dataset(tree, path, node, storage_options, limits, lock, decoders) -> Dataset:
    """The python-blosc2 CTable at ``node`` (see :mod:`.tables`)."""
    recipe = TableRecipe(path, node, storage_options, limits)
    table = Table(tree, node, limits)
    return table_dataset(table, recipe, _lock_of(lock), decoders.get("drop_variables"))


def _xb2_dataset(tree, path: str, node: str, lock, decoders) -> Dataset:
    if node != "/":
        raise KeyError(f"no group {node!r} in {path}: a dataset in xarray-blosc2's layout has none")
    return xb2_tree_dataset(tree, path, lock, decoders)


def _path_of(filename_or_obj) -> str:
    if not isinstance(filename_or_obj, (str, os.PathLike)):
        raise TypeError(
            "the b2nd engine opens paths and URLs, not "
            f"{type(filename_or_obj).__name__} (use b2store.open for bytes)"
        )
    path = _normalize_path(filename_or_obj)
    return path if isinstance(path, str) else os.fspath(path)


def _check_variable_name(name) -> None:
    if name is not None and (not isinstance(name, str) or not name or "/" in name):
        raise ValueError(f"variable_name must be a non-empty str without '/', not {name!r}")


def _kind_by_suffix(path: str) -> str:
    suffix = os.path.splitext(path.rstrip("/"))[1].lower()
    if suffix in (".b2d", ".b2z"):
        return "tree"
    if _is_remote(path) or os.path.exists(path.removeprefix("file://")):
        return "frame"
    raise FileNotFoundError(f"no Blosc2 frame or tree at {path}")


def _group_path(group: str | None) -> str:
    if not group or group == "/":
        return "/"
    return "/" + group.strip("/")


def _lock_of(lock):
    if lock is True:
        return threading.Lock()
    return lock or None
