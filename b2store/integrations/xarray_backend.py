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
"""

from __future__ import annotations

import json
import os
import posixpath
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
from xarray import Dataset, Variable, conventions
from xarray.backends.common import (
    BackendArray,
    BackendEntrypoint,
    _normalize_path,
    datatree_from_dict_with_io_cleanup,
)
from xarray.backends.file_manager import CachingFileManager
from xarray.core import indexing

from ..errors import UnsupportedError
from ..limits import Limits, resolve
from .xarray_conventions import (  # noqa: F401 - DIMENSION_KEY etc. re-exported
    DIMENSION_KEY,
    FORMAT_VERSION,
    XARRAY_KEY,
    dims_of,
    embedded_coords,
    is_structural,
    named_dims,
    restore_attrs,
    xarray_meta,
)

__all__ = ["B2ndBackendEntrypoint", "B2ndBackendArray", "DIMENSION_KEY", "XARRAY_KEY"]

EXTENSIONS = (".b2nd", ".b2frame", ".b2f", ".b2d", ".b2z")
_MAGIC = b"\xa8b2frame\x00"  # bytes 1..10 of every frame (after a msgpack array marker)


# --- opening frames, by a recipe that pickles ------------------------------------------------


#: At most this many frames stay open waiting for their first read (opening thousands of
#: files with ``open_mfdataset`` must not hold thousands of descriptors); older ones close
#: and reopen when read, as without priming.
MAX_PRIMED = 64
_primed_order: OrderedDict[int, _Primed] = OrderedDict()
_primed_lock = threading.Lock()


class _Primed:
    """An opener that hands out, once, the array it was primed with (the one opening the
    Dataset read the metadata from), so the first read does not open the frame again."""

    _primed = None

    def prime(self, arr) -> None:
        with _primed_lock:
            self._primed = arr
            _primed_order[id(self)] = self
            evicted = []
            while len(_primed_order) > MAX_PRIMED:
                evicted.append(_primed_order.popitem(last=False)[1])
        for opener in evicted:
            opener.drop_primed()

    def take_primed(self):
        with _primed_lock:
            arr, self._primed = self._primed, None
            _primed_order.pop(id(self), None)
        return arr

    def drop_primed(self) -> None:
        arr = self.take_primed()
        if arr is not None:
            getattr(arr, "schunk", arr).close()


class FrameRecipe(_Primed):
    """How to open one b2nd frame again, in any process: a path or URL, the byte offset of
    the frame in it (a ``.b2z`` member), fsspec options and the :class:`b2store.Limits` it
    is read with. Calling it opens the array."""

    __slots__ = ("urlpath", "offset", "storage_options", "limits", "_key", "_primed")

    def __init__(
        self,
        urlpath,
        offset: int = 0,
        storage_options: Mapping | None = None,
        limits: Limits | None = None,
    ):
        self.urlpath = os.fspath(urlpath)
        self.offset = int(offset)
        self.storage_options = dict(storage_options) if storage_options else None
        self.limits = limits
        self._primed = None
        # CachingFileManager needs a hashable opener; options can hold dicts and lists.
        options = json.dumps(self.storage_options, sort_keys=True, default=repr)
        self._key = (self.urlpath, self.offset, options, limits)

    def __call__(self):
        from ..tree import open_frame

        arr = self.take_primed()
        if arr is not None:
            return arr
        return open_frame(
            self.urlpath,
            offset=self.offset,
            storage_options=self.storage_options,
            limits=self.limits,
        )

    def __reduce__(self):
        return FrameRecipe, (self.urlpath, self.offset, self.storage_options, self.limits)

    def __eq__(self, other) -> bool:
        return isinstance(other, FrameRecipe) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        at = f", offset={self.offset}" if self.offset else ""
        return f"FrameRecipe({self.urlpath!r}{at})"


class _RefRecipe(_Primed):
    """A tree's array reference as a hashable opener (the reference itself pickles)."""

    def __init__(self, ref, key: tuple):
        self.ref, self._key = ref, key

    def __call__(self):
        arr = self.take_primed()
        return arr if arr is not None else self.ref.open()

    def __reduce__(self):
        return _RefRecipe, (self.ref, self._key)

    def __eq__(self, other) -> bool:
        return isinstance(other, _RefRecipe) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)


def _open_closable(opener, mode: str = "r"):
    # xarray's file manager always passes mode once unpickled; b2store reads only.
    if mode != "r":
        raise ValueError(f"the b2nd engine reads only (mode='r'), not mode={mode!r}")
    arr = opener()
    if not hasattr(arr, "close"):  # b2store releases without B2ndArray.close()
        arr.close = arr.schunk.close
    return arr


# --- the lazy array ---------------------------------------------------------------------------


class B2ndBackendArray(BackendArray):
    """A b2nd variable for xarray: holds a file manager (which pickles as the recipe to
    reopen) and reads, under ``lock`` when one is given, only the blocks a key touches."""

    def __init__(self, manager: CachingFileManager, shape, dtype, lock=None):
        self.manager = manager
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.lock = lock

    def __getitem__(self, key: indexing.ExplicitIndexer):
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._getitem
        )

    async def async_getitem(self, key: indexing.ExplicitIndexer):
        import asyncio

        return await asyncio.to_thread(self.__getitem__, key)

    def _getitem(self, key: tuple) -> np.ndarray:
        if self.lock is None:
            with self.manager.acquire_context() as arr:
                return outer_read(arr, key)
        with self.lock, self.manager.acquire_context(needs_lock=False) as arr:
            return outer_read(arr, key)


def outer_read(arr, key: tuple) -> np.ndarray:
    """``arr`` indexed orthogonally by ``key`` (integers, slices, 1-d integer arrays), reading
    for each array index one slice per b2nd chunk it touches, never the chunks between."""
    key = tuple(key) + (slice(None),) * (len(arr.shape) - len(key))
    if not any(isinstance(k, np.ndarray) for k in key):
        return np.asarray(arr[key])
    basic, squeeze, picks = [], [], {}
    for axis, (k, n) in enumerate(zip(key, arr.shape)):
        if isinstance(k, np.ndarray):
            k = np.where(k < 0, k + n, k).astype(np.intp)
            if k.size and (k.min() < 0 or k.max() >= n):
                raise IndexError(f"index out of bounds for axis {axis} with size {n}")
            unique, inverse = np.unique(k, return_inverse=True)
            picks[axis] = (unique, inverse)
            basic.append(None)
            squeeze.append(slice(None))
        elif isinstance(k, slice):
            basic.append(k)
            squeeze.append(slice(None))
        else:
            i = int(k)
            basic.append(slice(i, i + 1) if i != -1 else slice(i, None))
            squeeze.append(0)
    shape = [
        len(picks[a][0]) if a in picks else len(range(n)[basic[a]]) for a, n in enumerate(arr.shape)
    ]
    out = np.empty(shape, arr.dtype)
    if out.size:
        groups = {a: _runs_by_chunk(u, arr.chunks[a]) for a, (u, _) in picks.items()}
        axes = sorted(groups)
        for combo in _product([groups[a] for a in axes]):
            sel, dst = list(basic), [slice(None)] * len(shape)
            local = [slice(None)] * len(shape)
            for a, (lo, hi, positions, values) in zip(axes, combo):
                sel[a] = slice(lo, hi)
                dst[a] = slice(positions[0], positions[-1] + 1)
                local[a] = values - lo
            block = np.asarray(arr[tuple(sel)])
            out[tuple(dst)] = block[np.ix_(*_as_arrays(local, block.shape))]
    for a, (_, inverse) in picks.items():
        out = np.take(out, inverse.reshape(-1), axis=a)
    return out[tuple(squeeze)]


def _runs_by_chunk(unique: np.ndarray, chunk: int):
    """Sorted unique indices split by the chunk they fall in: (lo, hi, positions, values)."""
    if not len(unique):
        return []
    cut = np.flatnonzero(np.diff(unique // max(chunk, 1))) + 1
    runs, start = [], 0
    for stop in [*cut.tolist(), len(unique)]:
        values = unique[start:stop]
        runs.append((int(values[0]), int(values[-1]) + 1, np.arange(start, stop), values))
        start = stop
    return runs


def _product(lists):
    if not lists:
        yield ()
        return
    for head in lists[0]:
        for rest in _product(lists[1:]):
            yield (head, *rest)


def _as_arrays(local, shape):
    return [np.arange(n) if isinstance(i, slice) else i for i, n in zip(local, shape)]


def _lazy_variable(opener, arr, lock, dims=None) -> tuple[Variable, _Handle]:
    """A Variable over ``arr`` (just opened, for its metadata) that reopens through
    ``opener`` when read, and the file manager that owns the handle."""
    vlmeta = dict(arr.vlmeta)
    info = xarray_meta(vlmeta)
    dims = dims if dims is not None else dims_of(vlmeta, arr.shape)
    manager = CachingFileManager(_open_closable, opener, mode="r")
    data = indexing.LazilyIndexedArray(B2ndBackendArray(manager, arr.shape, arr.dtype, lock))
    encoding = {
        "chunks": tuple(arr.chunks),
        "preferred_chunks": dict(zip(dims, arr.chunks)),
        "blocks": tuple(arr.blocks),
        "codec": _codec_name(arr),
        "clevel": arr.schunk.clevel,
        "filters": list(arr.schunk.filters),
        "filters_meta": list(arr.schunk.filters_meta),
        "contiguous": arr.schunk.contiguous,
    }
    variable = Variable(
        dims, data, restore_attrs(vlmeta, info.get("attr_types"), info.get("long_attrs")), encoding
    )
    opener.prime(arr)  # the first read uses this handle instead of opening the frame again
    return variable, _Handle(manager, opener)


class _Handle:
    """A variable's file manager and its opener (which may still hold the primed array)."""

    def __init__(self, manager: CachingFileManager, opener: _Primed):
        self.manager, self.opener = manager, opener

    def close(self) -> None:
        self.opener.drop_primed()
        self.manager.close()


def _codec_name(arr) -> str:
    codec = arr.schunk.codec
    return getattr(codec, "name", str(codec)).lower()


# --- sniffing ----------------------------------------------------------------------------------


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _has_magic(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(10)
    except OSError:
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


def _is_zip(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PK\x03\x04"
    except OSError:
        return False


# --- the engine --------------------------------------------------------------------------------


class B2ndBackendEntrypoint(BackendEntrypoint):
    """Open Blosc2 b2nd frames (``.b2nd``, ``.b2frame``, sparse-frame directories) and trees
    (``.b2d``, ``.b2z``, directories of frames) with ``xr.open_dataset(path, engine="b2nd")``.

    Backend options: ``group`` (a tree's group path), ``storage_options`` (fsspec options for
    URLs), ``lock`` (a lock held around each read; reads are positional, so None by default),
    ``limits`` (a :class:`b2store.Limits`: what the files may ask for, carried by the
    Dataset's lazy arrays into pickles and dask workers; the defaults when None).
    """

    description = "Open Blosc2 b2nd frames and .b2d/.b2z trees in xarray (b2store)"
    url = "https://github.com/b2store/b2store/blob/main/docs/xarray.md"
    supports_groups = True
    open_dataset_parameters = (
        "filename_or_obj",
        "drop_variables",
        "mask_and_scale",
        "decode_times",
        "concat_characters",
        "decode_coords",
        "use_cftime",
        "decode_timedelta",
        "group",
        "storage_options",
        "lock",
        "limits",
    )

    def guess_can_open(self, filename_or_obj) -> bool:
        if isinstance(filename_or_obj, (str, os.PathLike)):
            path = os.fspath(filename_or_obj)
            if not isinstance(path, str):
                return False
            if os.path.splitext(path.rstrip("/"))[1].lower() in EXTENSIONS:
                return True
            return _classify(path) is not None
        return False

    def open_dataset(
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
    ) -> Dataset:
        decoders = dict(
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
            drop_variables=drop_variables,
        )
        resolve(limits)  # a TypeError before anything is opened
        path = _path_of(filename_or_obj)
        kind = _classify(path) or _kind_by_suffix(path)
        if kind == "frame":
            if group not in (None, "", "/"):
                raise ValueError(f"a single frame has no groups; group={group!r}")
            return _frame_dataset(path, storage_options, _lock_of(lock), decoders, limits)
        tree = _open_tree(path, storage_options, limits)
        node = _group_path(group)
        if node not in tree.groups():
            raise KeyError(f"no group {node!r} in {path}; groups: {sorted(tree.groups())}")
        sizes = _ancestor_sizes(tree, node)
        return _group_dataset(tree, path, node, _lock_of(lock), decoders, sizes)

    def open_groups_as_dict(
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
    ) -> dict[str, Dataset]:
        decoders = dict(
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
            drop_variables=drop_variables,
        )
        resolve(limits)  # a TypeError before anything is opened
        path = _path_of(filename_or_obj)
        kind = _classify(path) or _kind_by_suffix(path)
        if kind == "frame":
            return {"/": _frame_dataset(path, storage_options, _lock_of(lock), decoders, limits)}
        tree = _open_tree(path, storage_options, limits)
        root = _group_path(group)
        out, sizes = {}, {}
        for node in sorted(tree.groups()):
            if node == root or node.startswith(root.rstrip("/") + "/"):
                rel = "/" + node[len(root) :].strip("/") if root != "/" else node
                # A child sees its parent's dimensions (DataTree aligns them).
                sizes[node] = dict(sizes.get(posixpath.dirname(node.rstrip("/")) or "/", {}))
                if node == root:
                    sizes[node] = {}
                out[rel] = _group_dataset(tree, path, node, _lock_of(lock), decoders, sizes[node])
        if not out:
            raise KeyError(f"no group {root!r} in {path}")
        return out

    def open_datatree(self, filename_or_obj, **kwargs):
        groups = self.open_groups_as_dict(filename_or_obj, **kwargs)
        return datatree_from_dict_with_io_cleanup(groups)


def _path_of(filename_or_obj) -> str:
    if not isinstance(filename_or_obj, (str, os.PathLike)):
        raise TypeError(
            "the b2nd engine opens paths and URLs, not "
            f"{type(filename_or_obj).__name__} (use b2store.open for bytes)"
        )
    path = _normalize_path(filename_or_obj)
    return path if isinstance(path, str) else os.fspath(path)


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


def _open_tree(path: str, storage_options, limits: Limits | None = None):
    try:
        from ..tree import open_tree
    except ImportError:  # pragma: no cover - the tree reader is part of the package
        raise UnsupportedError("tree reading without b2store.tree", path) from None
    return open_tree(path, storage_options=storage_options, limits=limits)


def _decode(variables: dict, attrs: dict, decoders: dict, closers) -> Dataset:
    vars_, attrs_, coord_names = conventions.decode_cf_variables(variables, attrs, **decoders)
    ds = Dataset(vars_, attrs=attrs_)
    ds = ds.set_coords(coord_names.intersection(vars_))
    ds.set_close(_Closer(closers))
    return ds


class _Closer:
    """Closes a Dataset's file managers; pickles with them (as recipes)."""

    def __init__(self, managers):
        self.managers = list(managers)

    def __call__(self) -> None:
        for manager in self.managers:
            manager.close()


def _frame_dataset(
    path: str, storage_options, lock, decoders, limits: Limits | None = None
) -> Dataset:
    from ..nd.array import B2ndArray

    recipe = FrameRecipe(path, storage_options=storage_options, limits=limits)
    arr = recipe()
    if not isinstance(arr, B2ndArray):
        with arr:
            return _schunk_dataset(arr, decoders)
    try:
        info = xarray_meta(arr.vlmeta)
        name = info.get("name")
        if not isinstance(name, str) or not name:
            name = Path(path.rstrip("/")).stem or "data"
        var, manager = _lazy_variable(recipe, arr, lock)
    except BaseException:
        arr.schunk.close()
        raise
    variables = {**embedded_coords(info), name: var}
    attrs = restore_attrs(info.get("attrs") or {}, info.get("dataset_attr_types"), raw=True)
    return _decode(variables, attrs, decoders, [manager])


def _schunk_dataset(schunk, decoders) -> Dataset:
    # Its data has no shape or dtype: b2store.open reads it as an SChunk.
    """A frame without the b2nd metalayer: its vlmeta as attributes (a group's attributes
    frame); data without a shape is not an array."""
    if schunk.nbytes:
        raise UnsupportedError("array from a super-chunk without the b2nd metalayer", "no shape")
    vlmeta = dict(schunk.vlmeta)
    info = xarray_meta(vlmeta)
    attrs = restore_attrs(vlmeta, info.get("attr_types"), info.get("long_attrs"))
    return _decode({}, attrs, decoders, [])


def _ancestor_sizes(tree, node: str) -> dict:
    """The dimension lengths ``node``'s ancestors define, as :func:`open_datatree` names
    them, so that a group opened alone names its unnamed dimensions as in the DataTree."""
    sizes: dict = {}
    if node == "/":
        return sizes
    parts = node.strip("/").split("/")
    for depth in range(len(parts)):
        prefix = "/" + "/".join(parts[:depth]) + ("/" if depth else "")
        arrays = [
            (p, r)
            for p, r in sorted(tree.arrays().items())
            if p.startswith(prefix) and "/" not in p[len(prefix) :]
        ]
        metas = []
        for apath, ref in arrays:
            arr = ref.open()
            try:
                metas.append((apath[len(prefix) :], dict(arr.vlmeta), arr.shape))
            finally:
                arr.schunk.close()
        for _, vlmeta, shape in metas:
            for d, n in zip(named_dims(vlmeta, len(shape)) or (), shape):
                sizes.setdefault(d, n)
        for name, vlmeta, shape in metas:
            dims_of(vlmeta, shape, sizes, name)
    return sizes


def _group_dataset(
    tree, tree_path: str, node: str, lock, decoders, sizes: dict | None = None
) -> Dataset:
    """One group as a Dataset; ``sizes`` (the ancestors' dimension lengths, updated with this
    group's) keeps unnamed dimensions of different lengths apart across a DataTree."""
    prefix = node.rstrip("/") + "/"
    gattrs = dict(tree.groups()[node])
    info = xarray_meta(gattrs)
    attrs = restore_attrs(gattrs, info.get("attr_types"), info.get("long_attrs"))
    sizes = {} if sizes is None else sizes
    opened = []
    try:
        for apath, ref in sorted(tree.arrays().items()):
            if apath.startswith(prefix) and "/" not in apath[len(prefix) :]:
                opened.append((apath, ref, ref.open()))
        # Named dimensions first: an unnamed one must not take a name they use.
        for _, _, arr in opened:
            named = named_dims(arr.vlmeta, arr.ndim)
            for d, n in zip(named or (), arr.shape):
                sizes.setdefault(d, n)
        variables, closers = {}, []
        while opened:
            apath, ref, arr = opened[0]
            name = apath[len(prefix) :]
            dims = dims_of(arr.vlmeta, arr.shape, sizes, name)
            opener = _RefRecipe(ref, (tree_path, apath, ref.limits))
            variables[name], handle = _lazy_variable(opener, arr, lock, dims)
            opened.pop(0)
            closers.append(handle)
    except BaseException:
        for _, _, arr in opened:
            arr.schunk.close()
        for handle in locals().get("closers", ()):
            handle.close()
        raise
    return _decode(variables, attrs, decoders, closers)
