"""xarray-blosc2's layout read without xarray: a dataset's manifest and files checked, and each
frame's variable (its name, dimensions, attributes and role) told from its vlmeta; shared by
the ``b2nd`` engine (:mod:`.xarray.blosc2_layout`, which decodes its packings) and
:class:`~b2store.B2ndStore` (:mod:`.zarr.xb2_nodes`), so that both name xarray-blosc2's
variables and dimensions alike and refuse the same files the same way."""

from __future__ import annotations

import json
import os
import struct
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FormatError, UnsupportedError

__all__ = [
    "SEALED_MARKER",
    "foreign_layout",
    "foreign_vlmeta",
    "MANIFEST",
    "PIPELINE",
    "COMMIT",
    "COORD_PREFIX",
    "Xb2Variable",
    "xb2_variable",
    "xb2_dataset",
    "xb2_packing",
    "unsupported",
    "json_object",
]

MANIFEST = "dataset.json"
PIPELINE = "pipeline.yaml"
COMMIT = "_commit"
COORD_PREFIX = "_coord_"
SEALED_MAGIC = b"B2ENCBLB\x02"
SEALED_MARKER = "an xarray-blosc2 sealed (encrypted) dataset blob"
_ZIP_MAGIC = b"PK\x03\x04"
# The vlmeta keys b2store's writers name dimensions and keep their bookkeeping in (as
# xarray/conventions.py and zarr/zarr_json.py name them): a frame with either is not
# xarray-blosc2's.
_DIMENSION_KEY = "_ARRAY_DIMENSIONS"
_XARRAY_KEY = "_xarray"
VLMETA_KEYS = frozenset(
    {
        "dims",
        "var",
        "coord_name",
        "is_coord",
        "dtype",
        "labels",
        "units",
        "long_name",
        "attrs",
        # bookkeeping xarray-blosc2's reader reads nothing from
        "nbytes",
        "cbytes",
        "cratio",
        "lineage",
        "change_time",
        "knowledge_time",
        "valid_time",
    }
)
MANIFEST_KEYS = frozenset(
    {"data_vars", "coords", "dims", "attrs", "lineage", "variable_attrs", "geogrid", "group_by"}
)
#: Manifest keys of layouts not read here, and what they are.
REFUSED_MANIFEST_KEYS = {
    "zstd_dict": "ZSTD-dictionary compressed variables (.zstd files)",
    "sharding": "a dataset sharded by ISO week (.b2z or directory shards)",
    "shards": "a dataset sharded by ISO week (.b2z or directory shards)",
    "frozen": "a dataset sharded by ISO week (.b2z or directory shards)",
}


# --- recognising the layout ----------------------------------------------------------------


def foreign_vlmeta(vlmeta: Mapping) -> str | None:
    """The marker, if a frame's vlmeta is an xarray-blosc2 variable's or coordinate's."""
    if _DIMENSION_KEY in vlmeta or _XARRAY_KEY in vlmeta or "dims" not in vlmeta:
        return None
    if not isinstance(vlmeta["dims"], (list, tuple)):
        return None
    for key in ("var", "is_coord", "coord_name"):
        if key in vlmeta:
            return f"vlmeta 'dims' and {key!r} without '_ARRAY_DIMENSIONS'"
    return None


def foreign_layout(path: str) -> str | None:
    """The marker, if the local ``path`` is a directory or zip in xarray-blosc2's layout or
    its sealed blob; None for anything else (remote paths are judged frame by frame)."""
    p = Path(path.rstrip("/").removeprefix("file://")).expanduser()
    try:
        if p.is_dir():
            # Files only: a DataTree may have a group (a directory) called dataset.json.
            return _foreign_names([e.name for e in os.scandir(p) if e.is_file()], "directory")
        if not p.is_file():
            return None
        with open(p, "rb") as fh:
            head = fh.read(len(SEALED_MAGIC))
        if head == SEALED_MAGIC:
            return SEALED_MARKER
        if head[:4] != _ZIP_MAGIC:
            return None
        directory = _central_directory(p)
        if directory is not None and not any(m in directory for m in _NAME_MARKERS):
            return None  # no member is called so: the common case, without parsing names
        with zipfile.ZipFile(p) as zf:
            return _foreign_names([n for n in zf.namelist() if not n.endswith("/")], "zip")
    except (OSError, zipfile.BadZipFile, ValueError):
        return None  # not readable here: the opener says why


_NAME_MARKERS = (MANIFEST.encode(), COORD_PREFIX.encode())
_EOCD = struct.Struct("<4s4xHHII")  # signature, ..., entries, entries, size, offset
_EOCD64_LOCATOR = struct.Struct("<4sIQI")  # signature, disk, offset of the zip64 record
_EOCD64 = struct.Struct("<4sQ2H2I2Q2Q")  # ..., entries, entries, size, offset


def _central_directory(path: Path) -> bytes | None:
    """The raw central directory of the zip at ``path`` (names are searched in it before
    zipfile parses 70,000 entries one by one), or None where it cannot be found cheaply."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        tail_at = max(0, size - (1 << 16) - _EOCD.size)
        fh.seek(tail_at)
        tail = fh.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < _EOCD.size:
            return None
        _, _, _, cd_size, cd_offset = _EOCD.unpack_from(tail, at)
        if 0xFFFFFFFF in (cd_size, cd_offset) and at >= _EOCD64_LOCATOR.size:
            sig, _, record, _ = _EOCD64_LOCATOR.unpack_from(tail, at - _EOCD64_LOCATOR.size)
            if sig != b"PK\x06\x07" or record + _EOCD64.size > size:
                return None
            fh.seek(record)
            fields = _EOCD64.unpack(fh.read(_EOCD64.size))
            if fields[0] != b"PK\x06\x06":
                return None
            cd_size, cd_offset = fields[-2], fields[-1]
        if cd_offset + cd_size > size:
            return None
        fh.seek(cd_offset)
        return fh.read(cd_size)


def _foreign_names(names: list[str], where: str) -> str | None:
    base = {n.rsplit("/", 1)[-1] for n in names}
    if where == "directory" and MANIFEST in base:
        return f"its {MANIFEST} manifest in the directory"
    if where == "zip" and MANIFEST in base:
        return f"its {MANIFEST} manifest in the zip"
    if "embed.b2e" in base:
        return None  # a python-blosc2 tree: a variable may well be called _coord_x
    if any(n.startswith(COORD_PREFIX) and n.endswith(".b2nd") for n in base):
        return f"its {COORD_PREFIX}<name>.b2nd coordinate frames"
    return None


def unsupported(what: str, ident) -> UnsupportedError:
    return UnsupportedError(f"xarray-blosc2 {what}", ident)


def json_object(data: bytes | str, field_: str) -> dict:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise FormatError(field_, "a JSON object", f"{type(exc).__name__}: {exc}") from None
    if not isinstance(value, dict):
        raise FormatError(field_, "a JSON object", type(value).__name__)
    return value


def _truthy(value, field_: str) -> bool:
    # xarray-blosc2 writes True, or "1" for its spatial_ref; it tests Python truth.
    if not isinstance(value, (bool, int, str)):
        raise FormatError(field_, "a bool, int or str", repr(value))
    return bool(value)


def _str_or_none(vlmeta: Mapping, key: str, where: str) -> str | None:
    value = vlmeta.get(key)
    if value is not None and not isinstance(value, str):
        raise FormatError(f"{where} vlmeta {key!r}", "a str", repr(value))
    return value or None


@dataclass
class Xb2Variable:
    """What a frame's vlmeta says of its variable: ``labels`` for a coordinate of strings
    (its data are positions in them), ``scalar`` for a 0-d coordinate (``dims: ["_scalar"]``,
    its value the frame's first item)."""

    name: str
    dims: tuple[str, ...]
    attrs: dict = field(default_factory=dict)
    is_coord: bool = False
    labels: list[str] | None = None
    scalar: bool = False


def xb2_variable(
    vlmeta: Mapping, ndim: int, size: int, dtype, stem: str, manifest: Mapping, where: str,
    single: bool,
) -> Xb2Variable:  # fmt: skip
    """The variable of a frame with ``vlmeta`` (of ``ndim`` dimensions, ``size`` items of
    ``dtype``) named ``stem``.b2nd: ``single`` for a lone frame, else one of a dataset with
    ``manifest``. What xarray-blosc2 does not write is refused, naming it."""
    unknown = sorted(set(vlmeta) - VLMETA_KEYS)
    if unknown:
        raise unsupported(f"vlmeta key of {where}", unknown[0])
    dims = vlmeta.get("dims", [f"dim_{i}" for i in range(ndim)])
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, str) for d in dims):
        raise FormatError(f"{where} vlmeta 'dims'", "a list of names", repr(dims))
    dims = tuple(dims)
    is_coord = _truthy(vlmeta.get("is_coord", False), f"{where} vlmeta 'is_coord'")
    var = _str_or_none(vlmeta, "var", where)
    coord_name = _str_or_none(vlmeta, "coord_name", where)
    # xarray-blosc2 names a lone frame by ``var`` (else its file), one in a dataset by
    # ``coord_name``, ``var``, else its file.
    name = (var or stem) if single else (coord_name or var or stem)

    attrs = {k: vlmeta[k] for k in ("units", "long_name") if k in vlmeta}
    packed_json = vlmeta.get("attrs")
    if packed_json:
        if not isinstance(packed_json, str):
            raise FormatError(f"{where} vlmeta 'attrs'", "a JSON string", repr(packed_json))
        attrs.update(json_object(packed_json, f"{where} vlmeta 'attrs'"))
    if not single:
        extra = manifest.get("variable_attrs", {}).get(name, {})
        if not isinstance(extra, Mapping):
            raise FormatError(f"{MANIFEST} variable_attrs[{name!r}]", "an object", repr(extra))
        attrs.update(extra)
    out = Xb2Variable(name, dims, attrs, is_coord)

    kind = vlmeta.get("dtype")
    if kind is not None and kind != "string" and kind != str(dtype):
        raise unsupported(f"vlmeta 'dtype' of {where} (stored {dtype})", kind)
    if is_coord and kind == "string":
        labels = vlmeta.get("labels", [])
        if not isinstance(labels, list) or not all(isinstance(s, str) for s in labels):
            raise FormatError(f"{where} vlmeta 'labels'", "a list of str", repr(labels)[:80])
        if len(dims) != 1 or len(labels) != size:
            raise FormatError(f"{where} vlmeta 'labels'", f"{size} labels", len(labels))
        out.labels = labels
        return out
    if kind == "string":
        raise unsupported(f"vlmeta 'dtype' of {where} (not a coordinate)", kind)
    if is_coord and dims == ("_scalar",):
        if size < 1:
            raise FormatError(f"{where} scalar coordinate", "one value", "none")
        out.scalar = True
        return out
    if len(dims) != ndim:
        raise FormatError(f"{where} vlmeta 'dims'", f"{ndim} names", repr(list(dims)))
    return out


def xb2_packing(var: Xb2Variable, manifest: Mapping, single: bool) -> str | None:
    """Which of xarray-blosc2's packings quantised ``var``'s values: ``"geogrid"`` (its
    parameters in the manifest), ``"geogrid-attrs"`` (in its attributes), ``"lossy"``, or
    None."""
    if not single and var.name in manifest.get("geogrid", {}):
        return "geogrid"
    if any(k.startswith("_geogrid") for k in var.attrs):
        return "geogrid-attrs"
    if "_OriginalType" in var.attrs:
        return "lossy"
    return None


# --- a dataset ---------------------------------------------------------------------------------


def xb2_dataset(tree) -> tuple[dict, dict]:
    """``(manifest, attributes)`` of the dataset ``tree`` (in xarray-blosc2's layout), as both
    readers begin: the files of layouts not read here refused first."""
    _check_files(tree)
    manifest = _manifest(tree)
    return manifest, _dataset_attrs(tree, manifest)


def _manifest(tree) -> dict:
    """The dataset's ``dataset.json`` (empty where there is none), its keys checked."""
    if MANIFEST not in tree.files():
        return {}
    manifest = json_object(tree.read_file(MANIFEST), MANIFEST)
    for key in manifest:
        if key in REFUSED_MANIFEST_KEYS:
            raise unsupported(f"{MANIFEST} key {key!r}: {REFUSED_MANIFEST_KEYS[key]}", key)
        if key not in MANIFEST_KEYS:
            raise unsupported(f"{MANIFEST} key", key)
    for key in ("attrs", "variable_attrs", "geogrid"):
        if not isinstance(manifest.get(key, {}), Mapping):
            raise FormatError(f"{MANIFEST} {key}", "a JSON object", repr(manifest[key])[:80])
    return manifest


def _check_files(tree) -> None:
    """Refuse the files of layouts not read here (groups, shards, ZSTD dictionaries)."""
    for name in tree.files():
        if name in (MANIFEST, PIPELINE):
            continue
        if "/" in name:
            raise unsupported("nested dataset (a group in a subdirectory)", name)
        if name.endswith(".b2z"):
            raise unsupported("sharded dataset (a .b2z shard)", name)
        if name.endswith((".zstd", ".zstd.json")) or name == "_zstd_dict.bin":
            raise unsupported("ZSTD-dictionary compressed variable", name)
        raise unsupported("dataset file", name)
    nested = [g for g in tree.groups() if g != "/"]
    if nested:
        raise unsupported("nested dataset (a group in a subdirectory)", nested[0])


def _dataset_attrs(tree, manifest: Mapping) -> dict:
    """The Dataset's attributes as xarray-blosc2 serves them: the manifest's, ``lineage`` as
    a JSON string, and ``pipeline.yaml``'s text."""
    attrs = dict(manifest.get("attrs", {}))
    lineage = manifest.get("lineage")
    if lineage:
        attrs["lineage"] = lineage if isinstance(lineage, str) else json.dumps(lineage)
    if PIPELINE in tree.files():
        try:
            attrs["pipeline"] = tree.read_file(PIPELINE).decode()
        except UnicodeDecodeError as exc:
            raise FormatError(PIPELINE, "UTF-8 text", str(exc)) from None
        attrs.setdefault("pipeline_format", "hydra_zen.yaml")
    return attrs
