"""A ``B2ndStore``'s nodes: a tree's groups and arrays as Zarr nodes, with their ``zarr.json``.

The index maps each Zarr node path to a group (its attributes) or an array (a reference to
its frame); arrays are opened once per store, and their metadata documents are synthesized
by :mod:`.meta`. :class:`~b2store.integrations.zarr.store.B2ndStore` inherits it.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Mapping
from typing import Any

from ...errors import UnsupportedError
from ...frame.sniff import NotBlosc2Error, looks_like_directory
from ...limits import Limits
from ...tree import is_url, open_tree
from ..embedded import dims_of, frame_variable_name, named_dims
from .xb2_nodes import is_xb2_tree, xb2_index
from .zarr_json import DIMS_KEY, XARRAY_KEY, EmbeddedCoord, array_metadata, group_metadata

__all__ = ["StoreNodes", "CONSOLIDATED_MAX_NODES"]

#: The root's ``zarr.json`` holds every node's metadata inline (zarr then opens the tree
#: listing nothing) for trees of at most this many nodes. Past it, making the documents
#: (an array opened for each, 0.8 ms) and zarr parsing them (0.3 ms each) made opening a
#: 50,000-array tree take 60 s; without them zarr opens it in the time the tree takes to
#: list (5 s) and reads each node's ``zarr.json`` when it is asked for.
CONSOLIDATED_MAX_NODES = 5_000


class StoreNodes:
    """What :class:`~b2store.integrations.zarr.store.B2ndStore` serves, node by node: the
    index of Zarr node paths built from the tree at ``path`` (one frame, or a group view of
    it), the arrays opened once per store, and the ``zarr.json`` documents made from them.

    A mixin: the store sets the attributes below (see ``B2ndStore._setup``).
    """

    path: str
    group: bool
    dtype: str | None
    storage_options: dict | None
    limits: Limits | None
    _lock: threading.RLock
    _nodes: dict[str, tuple[str, Any]] | None
    _arrays: dict[str, Any]
    _docs: dict[str, dict]
    _single_frame: bool
    _writer: Any

    def _index(self) -> dict[str, tuple[str, Any]]:
        """Zarr node path -> ("group", attributes) or ("array", ArrayRef)."""
        nodes = self._nodes
        if nodes is not None:
            return nodes
        with self._lock:
            if self._nodes is not None:
                return self._nodes
            self._nodes = self._build_index()
            return self._nodes

    def _build_index(self) -> dict[str, tuple[str, Any]]:
        try:
            tree = open_tree(self.path, storage_options=self.storage_options, limits=self.limits)
        except FileNotFoundError:
            if getattr(self, "read_only", False):
                # Nothing to read is a wrong path, not an empty store (zarr would say
                # GroupNotFoundError): named as zarr's LocalStore names a missing root.
                raise FileNotFoundError(
                    errno.ENOENT, "no Blosc2 frame or tree to read", self.path
                ) from None
            return {}  # nothing yet (a store about to be written)
        self._single_frame = tree.kind == "frame"
        if tree.kind == "dir" and not tree.arrays():
            _refuse_zarr_directory(self.path)
        if tree.kind != "frame" and is_xb2_tree(self.path, tree):
            if not getattr(self, "read_only", True):
                raise UnsupportedError(
                    "writing through B2ndStore into xarray-blosc2's layout (its frames keep "
                    "dimensions and attributes by its own convention); open it with mode='r'",
                    self.path,
                )
            return xb2_index(tree, self.path)
        if tree.kind == "frame":
            (ref,) = tree.arrays().values()
            if self.group:
                return self._frame_group(ref)
            return {"": ("array", ref)}
        # A python-blosc2 container or proxy cache in the tree is no array: refused, naming
        # it, rather than left out of the store's keys unsaid.
        tree.check_objects()
        nodes: dict[str, tuple[str, Any]] = {}
        for path, attrs in tree.groups().items():
            nodes[path.strip("/")] = ("group", dict(attrs))
        for path, ref in tree.arrays().items():
            nodes[path.strip("/")] = ("array", ref)
        return nodes

    def _frame_group(self, ref) -> dict[str, tuple[str, Any]]:
        """The group view of one frame: the array, named as the ``b2nd`` engine names it (its
        stored name, else ``data``, whatever the file is called);
        a frame written by ``to_b2nd`` also shows its embedded coordinates as arrays and
        the Dataset's attributes as the group's, so xarray's zarr engine sees the same
        Dataset as the ``b2nd`` engine."""
        arr = ref.open(dtype=self.dtype)
        try:
            vlmeta = dict(arr.vlmeta) if hasattr(arr, "vlmeta") else {}
        finally:
            getattr(arr, "schunk", arr).close()
        info = vlmeta.get(XARRAY_KEY)
        info = info if isinstance(info, Mapping) else {}
        name = frame_variable_name(info)
        attrs = info.get("attrs")
        if named_dims(vlmeta, len(arr.shape)) is None:
            # Dimension names as the b2nd engine gives an unnamed frame's (python-blosc2's
            # arrays): xarray's zarr engine needs names, and the views must agree.
            ref = _NamedRef(ref, {**vlmeta, DIMS_KEY: list(dims_of(vlmeta, arr.shape))})
        nodes: dict[str, tuple[str, Any]] = {
            "": ("group", dict(attrs) if isinstance(attrs, Mapping) else {}),
            name: ("array", ref),
        }
        coords = info.get("coords")
        for cname, spec in coords.items() if isinstance(coords, Mapping) else ():
            if isinstance(spec, Mapping) and isinstance(cname, str) and cname not in nodes:
                if cname and "/" not in cname and not cname.startswith("."):
                    nodes[cname] = ("array", EmbeddedCoord(cname, spec))
        return nodes

    def _invalidate(self) -> None:
        with self._lock:
            self._nodes = None
            self._docs = {}

    def _array(self, node: str):
        """The opened array of ``node`` (opened once per store, read by many threads)."""
        arr = self._arrays.get(node)
        if arr is not None:
            return arr
        with self._lock:
            arr = self._arrays.get(node)
            if arr is None:
                kind, ref = self._index()[node]
                arr = self._writer.array(node) if self._writer is not None else None
                if arr is None:
                    arr = ref.open(dtype=self.dtype)
                self._arrays[node] = arr
            return arr

    def _node_meta(self, node: str) -> dict:
        if self._writer is not None:
            doc = self._writer.meta_for(node)
            if doc is not None:
                return doc
        kind, value = self._index()[node]
        where = f"{self.path}:{node or '/'}"
        if kind == "array":
            return self._array_meta(node, value, where)
        doc = group_metadata(value, where)
        if node == "" and len(self._index()) <= CONSOLIDATED_MAX_NODES:
            doc["consolidated_metadata"] = {
                "kind": "inline",
                "must_understand": False,
                "metadata": {path: self._node_meta(path) for path in sorted(self._index()) if path},
            }
        return doc

    def _array_meta(self, node: str, ref, where: str) -> dict:
        """An array's ``zarr.json``, synthesized once; an array not open yet is opened only
        for it and closed (a tree of thousands of arrays must not hold a descriptor each
        for its consolidated metadata: arrays stay open once their chunks are read)."""
        docs = self._docs
        doc = docs.get(node)
        if doc is not None:
            return doc
        # One frame, or frames behind URLs (no descriptor; reopening costs requests): keep.
        self._index()
        keep = self._single_frame or is_url(self.path)
        own = getattr(ref, "shown_vlmeta", None)  # (where not the frame's own)
        if keep or node in self._arrays or self._writer is not None:
            doc = array_metadata(self._array(node), where, own)
        else:
            arr = ref.open(dtype=self.dtype)
            try:
                doc = array_metadata(arr, where, own)
            finally:
                arr.schunk.close()
        docs[node] = doc
        return doc


class _NamedRef:
    """A frame's reference with the vlmeta its Zarr metadata is made from
    (``shown_vlmeta``): its own, with the dimension names the b2nd engine gives it."""

    def __init__(self, ref, shown_vlmeta: dict):
        self.ref, self.path, self.shown_vlmeta = ref, ref.path, shown_vlmeta

    def open(self, dtype=None):
        return self.ref.open(dtype=dtype)


def _refuse_zarr_directory(path) -> None:
    """A directory holding Zarr's own metadata and no frames is a Zarr store: served as a
    tree it would be an empty group, so it is refused. (This store writes groups as
    ``__vlmeta__.b2f`` frames, never ``zarr.json`` files.)"""
    if is_url(path):
        return
    what = looks_like_directory(path)
    if what is not None and what.startswith("a Zarr store"):
        raise NotBlosc2Error(
            what, "chunks.b2frame", "Blosc2 frames or a sparse frame's index file", "none"
        ).named(str(path))
