"""Which per-variable encoding keys ``to_b2nd`` stores, which it ignores, and which it refuses
(the sets are in :mod:`.encoding_keys`); a group CF-encoded with them, and the values of a
write into a stored Dataset encoded as it stores them (:func:`encode_into`).

One rule, whatever a key comes through (``encoding=`` or the variable's own ``.encoding``):
a key the writer cannot store is refused with a ValueError naming the key and the variable,
never dropped. The only keys ignored are those of a variable's own ``.encoding`` that other
backends (netCDF4, h5netcdf, Zarr, the ``b2nd`` engine itself) and xarray put there when they
open a file to say how *that* file was stored: its chunking, compressors, source. They say
nothing about the values, and xarray's own writers drop them the same way
(``xarray.backends.zarr.extract_zarr_variable_encoding``). Given through ``encoding=``, the
same keys are refused, as xarray's writers refuse them.

CF keys (``_FillValue``, ``scale_factor``, ``_Unsigned``, ``units``, ``grid_mapping``,
``coordinates``, ...) are always honoured: they go through xarray's CF encoder and are stored
as the attributes it makes of them, which the engine's CF decoder reads back.

:func:`encode_group` applies them: a group's variables and attributes, CF-encoded as
xarray's netCDF writers encode them, with each variable's storage options beside.

Strings are stored as fixed-width items (``<U`` or ``S``, as wide as the longest): NumPy's
``StringDType`` and object arrays of str or bytes alike (what the encoders leave as objects
is made so last, :func:`fixed_width`). A missing value (None,
NaN, pandas' NA) becomes the empty string, as xarray's Zarr and netCDF writers store it
(with a ``SerializationWarning`` naming the variable and the way out), unless the variable
has a string ``_FillValue``: missing values are then stored as it and read back
missing, and a present string equal to it is refused (it would read back missing too).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd
import xarray as xr
from xarray import conventions
from xarray.backends.common import NONE_VAR_NAME, ensure_dtype_not_object
from xarray.coding.strings import CharacterArrayCoder, EncodedStringCoder

from ...chunk.encoder import writable_dtype
from ...chunk.params import ChunkParams, codec_name, splitmode_name
from ...tree import VLMETA_NAME
from .encoding_keys import (
    CF_KEYS,
    CHAR_DIM,
    CHAR_KEYS,
    FOREIGN_KEYS,
    STORAGE_KEYS,
    VALUE_KEYS,
)

__all__ = [
    "EncodingKeyError",
    "encode_group",
    "encode_groups",
    "characters",
    "is_stringdtype",
    "STORAGE_KEYS",
    "CF_KEYS",
    "CHAR_KEYS",
    "VALUE_KEYS",
    "FOREIGN_KEYS",
    "split_encoding",
    "finish_encoding",
    "check_string_width",
    "check_string_fill",
    "object_strings",
    "fixed_width",
    "wider_strings",
    "to_stored_dtype",
    "encode_into",
]


class EncodingKeyError(KeyError, ValueError):
    """An ``encoding=`` entry for a variable the Dataset does not have: a KeyError, as
    xarray's netCDF and Zarr writers raise (a lookup of the variable), and a ValueError, as
    to_b2nd raised before; its message is the words, not KeyError's quoted repr."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def split_encoding(name: str, var: xr.Variable, user: Mapping | None) -> tuple[dict, dict]:
    """The storage options and the CF encoding of variable ``name``, from the user's
    ``encoding=`` entry (which wins) and the variable's own ``.encoding``; a key of either
    that cannot be stored raises a ValueError naming it."""
    try:
        user = dict(user or {})
    except (TypeError, ValueError):
        # xarray's writers say the same of an entry that is no mapping
        raise ValueError(
            f"encoding for {name!r} must be castable to a dictionary, not {user!r}"
        ) from None
    bad = sorted(map(str, set(user) - STORAGE_KEYS - CF_KEYS))
    if bad:
        raise ValueError(
            f"unexpected encoding for {name!r}: {bad}; valid keys: {sorted(STORAGE_KEYS | CF_KEYS)}"
        )
    own = var.encoding
    bad = sorted(map(str, set(own) - STORAGE_KEYS - CF_KEYS - FOREIGN_KEYS - set(user)))
    if bad:
        raise ValueError(
            f"variable {name!r} carries encoding {bad} in its .encoding, which to_b2nd "
            f"cannot store; remove it (del ds[{name!r}].encoding[key], or ds.drop_encoding()) "
            f"to write without it. Stored keys: {sorted(STORAGE_KEYS | CF_KEYS)}"
        )
    storage = {
        **_ambient_storage(var),
        **{k: v for k, v in user.items() if k in STORAGE_KEYS},
    }
    cf = {k: v for k, v in own.items() if k in CF_KEYS}
    cf.update((k, v) for k, v in user.items() if k in CF_KEYS)
    return storage, cf


def is_stringdtype(dtype) -> bool:
    """Whether ``dtype`` is NumPy's StringDType without an ``na_object``: the one xarray's
    Zarr engine writes as such and reads back as such (xarray's writers turn those with an
    ``na_object`` into fixed-width strings, their missing values into '')."""
    sd = getattr(np.dtypes, "StringDType", None)
    return sd is not None and isinstance(dtype, sd) and not hasattr(dtype, "na_object")


def check_string_width(name: str, var: xr.Variable) -> None:
    """Refuse an encoding ``dtype`` of fixed-width strings narrower than the strings of
    ``var``: xarray's encoder casts with NumPy, which cuts each string to the width silently
    (xarray's netCDF writers store the cut strings). ``S1`` is netCDF's character array
    (:func:`characters`): each string whole, a byte per item."""
    want = var.encoding.get("dtype")
    try:
        want = np.dtype(want) if want is not None else None
    except TypeError:
        return  # not a dtype: the encoder says so
    if want is None or want.kind not in "SU" or want == np.dtype("S1"):
        return
    if var.dtype.kind in "SU":
        have = var.dtype.itemsize // (4 if var.dtype.kind == "U" else 1)
    elif var.dtype == object or var.dtype.kind == "T":
        values = np.asarray(var.values, dtype=object)
        flat = [v for v in values.ravel().tolist() if isinstance(v, (str, bytes))]
        have = max(map(len, flat), default=0)
    else:
        return
    width = want.itemsize // (4 if want.kind == "U" else 1)
    if width < have:
        raise ValueError(
            f"encoding dtype {want.str!r} of variable {name!r} is narrower than its strings "
            f"({have} characters): they would be cut; give a dtype of {have} characters or "
            "more, or none"
        )


def object_strings(var: xr.Variable) -> xr.Variable:
    """A NumPy ``StringDType`` variable as an object array of str, its missing entries (those
    equal to its ``na_object``) as NaN: the form xarray's encoders take strings with missing
    values in, so that they are stored as any object strings are (see the module docstring).
    Other variables are returned as they are. Dask data is computed: the width to store is
    only known once every string is."""
    if var.dtype.kind != "T":
        return var
    values = np.asarray(var.values, dtype=object)
    missing = pd.isnull(values)
    if missing.any():
        values[missing] = np.nan
    elif not values.size:
        # no item to type it by: xarray's encoder would make an empty object array float64
        values = values.astype("U1")
    encoding = dict(var.encoding)
    if getattr(encoding.get("dtype"), "kind", None) == "T":
        # how a Zarr store or the b2nd engine read it (they set it to keep a StringDType),
        # which xarray's encoder would cast the object strings back to
        del encoding["dtype"]
    return xr.Variable(var.dims, values, var.attrs, encoding)


def check_string_fill(name: str, var: xr.Variable) -> None:
    """Refuse a string ``_FillValue`` that would make a wrong answer: one equal to a string
    the variable holds (that string would read back missing), one of the other kind (bytes
    for str strings, or the reverse), and one on str strings to be written as netCDF
    characters (``dtype: "S1"``), which xarray's netCDF writers refuse the same way. Without
    a string ``_FillValue``, missing strings are said to be stored as ``""``."""
    fill = var.encoding.get("_FillValue", var.attrs.get("_FillValue"))
    if fill is None and var.dtype == object:
        _warn_missing_strings(name, var)
    if not isinstance(fill, (str, bytes)) or var.dtype.kind not in "OSUT":
        return
    values = np.asarray(var.values, dtype=object).ravel()
    present = [v for v in values.tolist() if isinstance(v, (str, bytes))]
    kinds = {bytes if isinstance(v, bytes) else str for v in present}
    if str in kinds and var.encoding.get("dtype") in ("S1", np.dtype("S1")):
        raise NotImplementedError(
            f"variable {name!r} has a _FillValue specified, but _FillValue is not yet "
            "supported on unicode strings written as characters (dtype 'S1'), as xarray's "
            "netCDF writers refuse it: drop the dtype to store whole strings"
        )
    if kinds and (bytes if isinstance(fill, bytes) else str) not in kinds:
        raise ValueError(
            f"_FillValue {fill!r} of variable {name!r} is {type(fill).__name__}, its strings "
            f"are {' and '.join(sorted(k.__name__ for k in kinds))}: give a fill of their kind"
        )
    if fill in present:
        raise ValueError(
            f"variable {name!r} holds the string {fill!r}, its _FillValue: that string would "
            "read back as missing; choose a _FillValue none of its strings equal"
        )


def _warn_missing_strings(name, var: xr.Variable) -> None:
    """Say so when missing values (None, NaN, pandas' NA) among strings are about to be stored
    as empty strings, as xarray's netCDF and Zarr writers store them (both formats of Zarr 3
    too): the file cannot tell them from ``""``, and a reader gets ``""`` back. A string
    ``_FillValue`` keeps them missing (:func:`check_string_fill`)."""
    values = np.asarray(var.values, dtype=object).ravel()
    missing = pd.isnull(values)
    count = int(missing.sum())
    if not count or count == values.size:
        return  # no strings (numbers or all missing: stored as floats, NaN read back NaN)
    if not all(isinstance(v, (str, bytes)) for v in values[~missing].tolist()):
        return  # numbers with NaN (floats), or mixed items: refused by the next step
    warnings.warn(
        f"variable {name!r} has {count} missing value(s) among its strings, stored as the "
        "empty string and read back as '' (as xarray's netCDF and Zarr writers store them); "
        f"give encoding={{{name!r}: {{'_FillValue': <a string none of its values is>}}}} "
        f"to keep them missing, or ds[{name!r}].fillna('') to store '' without this warning",
        xr.SerializationWarning,
        stacklevel=5,
    )


def finish_encoding(name: str, var: xr.Variable) -> xr.Variable:
    """``var`` as xarray's CF encoder left it, made ready to store: its ``_FillValue`` and
    ``missing_value`` in its dtype, an ``_Unsigned`` the encoder did not use (it moves it only
    with a fill value) stored as the attribute it is, and any other CF key it left unused
    (``units`` on a variable without times, say) refused rather than dropped."""
    encoding, attrs = dict(var.encoding), dict(var.attrs)
    if "_Unsigned" in encoding and var.dtype.kind in "iu" and "_Unsigned" not in attrs:
        attrs["_Unsigned"] = encoding.pop("_Unsigned")
        var = xr.Variable(var.dims, var.data, attrs, encoding)
    # ``_FillValue: None`` (or ``missing_value: None``) is xarray's way to say "write none":
    # nothing to store, as netCDF and Zarr store nothing.
    for key in ("_FillValue", "missing_value"):
        if key in encoding and encoding[key] is None:
            del encoding[key]
            var = xr.Variable(var.dims, var.data, var.attrs, encoding)
    left = sorted(k for k in encoding if k in CF_KEYS and k not in ("dtype", CHAR_DIM))
    if left:
        raise ValueError(
            f"encoding {left} of variable {name!r} does not apply to its data "
            f"({var.dtype}) and would not be stored; set it as an attribute instead, or "
            "remove it"
        )
    return _typed_fill_values(var)


def _typed_fill_values(var: xr.Variable) -> xr.Variable:
    """``var`` with its ``_FillValue`` and ``missing_value`` attributes in its own dtype, as
    CF requires and netCDF and Zarr store them: a plain ``255`` on a ``u1`` variable must read
    back as ``uint8`` for xarray's decoder (an ``_Unsigned="false"`` view of 255 is -1; a
    Python 255 overflows ``int8``). A value the dtype cannot hold exactly stays as given."""
    if var.dtype.kind not in "iufc":
        return var
    attrs, changed = dict(var.attrs), False
    for key in ("_FillValue", "missing_value"):
        value = attrs.get(key)
        if value is None or isinstance(value, (np.generic, np.ndarray)):
            continue
        try:
            given = np.asarray(value)
            if given.dtype.kind not in "biufc":
                continue
            cast = given.astype(var.dtype)
            if not np.array_equal(cast, given, equal_nan=given.dtype.kind in "fc"):
                continue
        except (TypeError, ValueError, OverflowError):
            continue
        attrs[key], changed = (cast[()] if cast.ndim == 0 else cast), True
    return var if not changed else xr.Variable(var.dims, var.data, attrs, var.encoding)


def _ambient_storage(var: xr.Variable) -> dict:
    """Storage options a variable's encoding carries (from the b2nd engine), if they fit.

    Zarr's ``filters`` share the name with b2nd's: in an encoding Zarr made (it has Zarr's
    compressors and no ``filters_meta``) they are Zarr's, and ignored."""
    enc = var.encoding
    out = _blosc2_compressor(enc.get("compressors"))
    out.update(
        (k, enc[k])
        for k in ("codec", "codec_meta", "clevel", "splitmode", "filters_meta")
        if k in enc
    )
    zarr_made = {"compressors", "compressor", "serializer"} & set(enc)
    zarrs = "filters_meta" not in enc and bool(zarr_made)
    if "filters" in enc and not zarrs:
        out["filters"] = enc["filters"]
    chunks, blocks = enc.get("chunks"), enc.get("blocks")
    if (
        isinstance(chunks, (tuple, list))
        and len(chunks) == var.ndim
        and all(1 <= c <= max(n, 1) for c, n in zip(chunks, var.shape))
    ):
        out["chunks"] = tuple(chunks)
        if isinstance(blocks, (tuple, list)) and len(blocks) == var.ndim:
            if all(1 <= b <= c for b, c in zip(blocks, chunks)):
                out["blocks"] = tuple(blocks)
    return out


def _blosc2_compressor(compressors) -> dict:
    """The storage options of a lone Blosc2 compressor in an encoding: the b2nd engine's (a
    dict in both Zarr forms), or the codec a Zarr v3 or v2 array was opened with (b2store's
    ``blosc2``); anything else says nothing a frame can store."""
    if not isinstance(compressors, (tuple, list)) or len(compressors) != 1:
        return {}
    (codec,) = compressors
    try:
        if isinstance(codec, Mapping) and codec.get("name") == "blosc2":
            params = ChunkParams.from_zarr(codec["configuration"])
        elif isinstance(codec, Mapping) and codec.get("id") == "blosc2":
            params = ChunkParams.from_numcodecs(codec)
        elif getattr(codec, "codec_id", None) == "blosc2" and hasattr(codec, "get_config"):
            params = ChunkParams.from_numcodecs(codec.get_config())
        elif hasattr(codec, "to_dict") and codec.to_dict().get("name") == "blosc2":
            params = ChunkParams.from_zarr(codec.to_dict().get("configuration") or {})
        else:
            return {}
    except (TypeError, ValueError, KeyError):
        return {}  # not a configuration a frame's writer takes: the defaults then
    return {
        "codec": codec_name(params.codec),
        "clevel": params.clevel,
        "filters": [f for f, _ in params.pipeline],
        "filters_meta": [m for _, m in params.pipeline],
        "splitmode": splitmode_name(params.splitmode),
    }


# --- a group encoded ---------------------------------------------------------------------------


def encode_group(ds: xr.Dataset, encoding: Mapping) -> tuple[dict, dict, dict, set, set]:
    """CF-encoded variables and attributes of ``ds``, the storage options of each variable,
    the names of its coordinates, and those of its StringDType variables (stored as ``<U``,
    read back as StringDType)."""
    if None in ds.variables:
        # xarray's netCDF and Zarr writers store a variable named None under NONE_VAR_NAME
        # ("__values__"), and their readers (and the b2nd engine's) give that name back as None
        ds = ds.rename_vars({None: NONE_VAR_NAME})
        encoding = {NONE_VAR_NAME if k is None else k: v for k, v in encoding.items()}
    unknown = set(encoding) - set(ds.variables)
    if unknown:
        raise EncodingKeyError(
            f"encoding for variables not in the dataset: {sorted(map(str, unknown))}"
        )
    ds = ds.copy(deep=False)
    storage = {}
    for name, var in ds.variables.items():
        if not isinstance(var.dtype, np.dtype):
            # a pandas extension type (xarray keeps one for some string coordinates):
            # refused, named, before xarray's CF encoder fails on it with a TypeError of its own
            writable_dtype(var.dtype)
        if name is not None and not isinstance(name, str):
            # the type and words of xarray's own writers (a Hashable is no file name)
            raise TypeError(
                f"Invalid name {name!r} for DataArray or Dataset key: must be either a "
                "string or None for serialization to b2nd"
            )
        if name == "":
            raise ValueError(
                f"Invalid name {name!r} for DataArray or Dataset key: string must be "
                "length 1 or greater for serialization to b2nd"
            )
        if "/" in name or name == VLMETA_NAME[:-4]:
            raise ValueError(f"variable name {name!r} cannot name a b2nd frame")
        storage[name], var.encoding = split_encoding(name, var, encoding.get(name))
        check_string_width(name, var)
    sd_names = {n for n, v in ds.variables.items() if is_stringdtype(v.dtype)}
    variables, attrs = conventions.encode_dataset_coordinates(ds)
    for name, var in variables.items():
        variables[name] = object_strings(var)
        check_string_fill(name, variables[name])
    variables, attrs = conventions.cf_encoder(variables, attrs)
    for name, var in variables.items():
        # xarray's netCDF writers' next step: object arrays typed from their items, missing
        # strings as "" (numbers as NaN), mixed items refused naming the variable
        var = characters(name, ensure_dtype_not_object(var, name=name))
        variables[name] = fixed_width(finish_encoding(name, var), name)
    return variables, attrs, storage, set(ds.coords), sd_names


def encode_groups(groups: Mapping, encodings: Mapping) -> dict:
    """:func:`encode_group` of every group of a Dataset or DataTree written anew (each with
    its entry of ``encodings``, none where it has none), in one call: ``{group path: what
    encode_group gives}``."""
    out = {}
    for gpath, ds in groups.items():
        out[gpath] = encode_group(ds, encodings.get(gpath) or {})
    return out


def characters(name, var: xr.Variable) -> xr.Variable:
    """Strings given the encoding ``dtype: "S1"`` as netCDF's character arrays, as xarray's
    netCDF writers store them: str strings encoded (``_Encoding``, utf-8 by default, kept as
    an attribute), then split into one byte per item along a last dimension ``string<n>``
    (or ``char_dim_name``). xarray's decoder joins them back and reports ``dtype: "S1"`` and
    ``_Encoding`` in the encoding. The variable's encoding keeps :data:`CHAR_DIM` to tell
    these one-byte items from whole one-byte strings (see
    :func:`.frames.whole_bytes_variable`)."""
    if var.encoding.get("dtype") not in ("S1", np.dtype("S1")) or var.dtype.kind not in "SU":
        # (kept by a netCDF file's reader: they say nothing of other strings' storage)
        if "_Encoding" in var.encoding or CHAR_DIM in var.encoding:
            var = var.copy(deep=False)
            var.encoding = {k: v for k, v in var.encoding.items() if k not in CHAR_KEYS}
        return var
    var = EncodedStringCoder(allows_unicode=True).encode(var, name=name)
    var = CharacterArrayCoder().encode(var, name=name)
    var.encoding.pop("_Encoding", None)  # of bytes strings: nothing to decode them with
    var.encoding[CHAR_DIM] = var.dims[-1]
    return var


# --- strings as fixed-width items ---------------------------------------------------------


def fixed_width(var: xr.Variable, name) -> xr.Variable:
    """Object-dtype strings as fixed-width items (b2nd holds fixed-size items only); so too
    a StringDType the encoders left (xarray 2026.2 declares a lazily read StringDType
    variable object while its chunks compute as StringDType)."""
    if var.dtype != object and var.dtype.kind != "T":
        return var
    if hasattr(var.data, "dask"):
        # the width is only known once every item is: say so, as xarray's writers do
        warnings.warn(
            f"variable {name} has data in the form of a dask array with dtype=object, which "
            "means it is being loaded into memory to determine a data type that can be "
            "safely stored on disk. To avoid this, coerce this variable to a fixed-size "
            "dtype with astype() before saving it.",
            xr.SerializationWarning,
            stacklevel=2,
        )
    values = np.asarray(var.values)
    if values.dtype.kind == "T":
        values = values.astype(object)  # NumPy keeps a StringDType through astype(str)
    flat = values.ravel().tolist()
    if all(isinstance(v, str) for v in flat):
        data = values.astype(str) if values.size else values.astype("U1")
    elif all(isinstance(v, bytes) for v in flat):
        data = values.astype(bytes) if values.size else values.astype("S1")
    else:
        raise TypeError(
            f"variable {name!r} holds both str and bytes strings: b2nd stores one kind; "
            "decode the bytes (or encode the str) first"
        )
    return xr.Variable(var.dims, data, var.attrs, var.encoding)


def to_stored_dtype(name, var, dtype) -> xr.Variable:
    """The encoded values in the stored dtype: strings no wider than stored are padded,
    wider ones refused (a b2nd item has a fixed size)."""
    if dtype is None or var.dtype == dtype:
        return var
    dtype = np.dtype(dtype)
    if var.dtype.kind in "SUO" or dtype.kind in "SU":
        var = fixed_width(var, name)
        if var.dtype.kind != dtype.kind or var.dtype.itemsize > dtype.itemsize:
            raise ValueError(
                f"Mismatched dtypes for variable {name} between the b2nd store on disk "
                f"({dtype}) and the dataset to append ({var.dtype}): strings can be appended "
                "no wider than stored"
            )
        return var.astype(dtype)
    return var  # numbers: cast to the frame's dtype when written (write_region checks)


def wider_strings(var, dtype) -> bool:
    """Whether ``var`` holds strings wider than items of ``dtype`` (strings) hold."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "SU":
        return False
    if var.dtype.kind in "SU":
        width = var.dtype.itemsize // (4 if var.dtype.kind == "U" else 1)
    elif var.dtype == object:
        flat = np.asarray(var.values).ravel().tolist()
        width = max((len(v) for v in flat if isinstance(v, (str, bytes))), default=0)
    else:
        return False
    return width > dtype.itemsize // (4 if dtype.kind == "U" else 1)


# --- values written into a stored Dataset ----------------------------------------------------


def encode_into(
    variables: Mapping, stored: xr.Dataset, *, coords, attrs, encoding, append_dim, whole: bool
) -> tuple[dict, dict, dict]:
    """The variables of a write into ``stored`` (checked against it, in its dimension order)
    encoded as it stores them, all in one pass: ``(into, new, attrs)``, ``into`` the values
    written into stored variables, in their stored dtype; ``new`` the variables written as
    new frames, ``(variable, storage options, whether a StringDType, whether a coordinate)``:
    those added, and those whose strings are wider than stored (refused where ``whole`` says
    the frame cannot be rewritten: a single frame, a region); ``attrs`` the group's
    attributes after the write (the stored ones, updated with the CF-encoded new ones), None
    where they do not change. ``coords`` names the coordinates, ``encoding`` that of the
    variables added."""
    kept, rewrite = {}, {}
    for name, var in variables.items():
        if name in stored.variables:
            have = stored.variables[name]
            var = var.copy(deep=False)
            old = have.encoding
            var.encoding = {k: old[k] for k in VALUE_KEYS if k in old}
            if wider_strings(var, old.get("dtype", have.dtype)):
                # Items of a frame have one size: strings wider than stored make the
                # variable a new frame, written whole with the stored storage options.
                if whole:
                    raise ValueError(
                        f"Mismatched dtypes for variable {name} between the b2nd store on "
                        f"disk ({old.get('dtype', have.dtype)}) and the dataset to write "
                        f"({var.dtype}): wider strings than stored can only be appended to a "
                        "variable of a .b2d or .b2z tree"
                    )
                if append_dim in var.dims:
                    var = xr.Variable.concat([have, var], dim=append_dim)
                var.encoding = {
                    **{k: v for k, v in old.items() if k in STORAGE_KEYS},
                    **{k: v for k, v in var.encoding.items() if k != "dtype"},
                }
                rewrite[name] = var
                continue
        kept[name] = var
    group = xr.Dataset(
        {k: v for k, v in kept.items() if k not in coords},
        {k: v for k, v in kept.items() if k in coords},
        attrs=attrs,
    )
    encoded, attrs, storage, coord_names, sd_names = encode_group(group, encoding)
    new, into = {}, {}
    for name, var in rewrite.items():
        # alone: its size along append_dim is the stored one's and the new one's
        enc, _, opts, _, sd = encode_group(xr.Dataset({name: var}), {})
        new[name] = (enc[name], opts[name], name in sd, name in coords)
    for name, var in encoded.items():
        if name not in stored.variables:
            new[name] = (var, storage[name], name in sd_names, name in coord_names)
        else:
            into[name] = to_stored_dtype(name, var, stored.variables[name].encoding.get("dtype"))
    if not attrs or all(k in stored.attrs and _same(stored.attrs[k], v) for k, v in attrs.items()):
        return into, new, None
    return into, new, {**stored.attrs, **attrs}


def _same(a, b) -> bool:
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b))) and type(a) is type(b)
    except (TypeError, ValueError):
        return False
