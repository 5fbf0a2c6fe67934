"""Limits: each one accepts a file at the limit, refuses one past it, and refuses before
allocating what the file asks for (msgpack's test_limits.py, for Blosc2 files)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import b2store
from b2store import LimitError, Limits, SChunk, SpecialValue
from b2store.chunk.encoder import special_chunk
from b2store.frame.header import FrameHeader
from b2store.limits import DEFAULT_LIMITS

# What opening or decoding a refused file may allocate: parsing, never the payload.
SMALL = 1 << 20


def peak_of(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    except LimitError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def frame_bytes(nchunks=3, chunk_items=1000, vlmeta=None) -> bytes:
    s = SChunk.create(None, typesize=4, chunksize=4 * chunk_items)
    for k in range(nchunks):
        s.append_data(np.full(chunk_items, k, "<i4"))
    if vlmeta:
        s.vlmeta.update(vlmeta)
    return s.to_cframe()


def with_header(data: bytes, **fields) -> bytes:
    header_len, _ = FrameHeader.peek_len(data[:24])
    new = FrameHeader.from_bytes(data[:header_len]).with_fields(**fields).to_bytes()
    assert len(new) == header_len
    return new + data[header_len:]


def test_defaults_are_one_place_and_validated():
    assert b2store.open.__kwdefaults__["limits"] is None  # None means DEFAULT_LIMITS
    assert DEFAULT_LIMITS == Limits()
    assert DEFAULT_LIMITS.max_chunk_nbytes == 1 << 30 and DEFAULT_LIMITS.max_ndim == 16
    with pytest.raises(ValueError, match="max_nchunks"):
        Limits(max_nchunks=-1)
    with pytest.raises(TypeError, match=r"limits must be a b2store\.Limits, not dict"):
        b2store.open(frame_bytes(), limits={"max_nchunks": 1})


def test_limit_errors_are_format_errors_naming_the_limit():
    with pytest.raises(b2store.FormatError, match="Limits.max_nchunks") as info:
        b2store.open(frame_bytes(3), limits=Limits(max_nchunks=2))
    assert isinstance(info.value, LimitError) and info.value.limit == 2
    assert info.value.found == 3 and info.value.limit_name == "max_nchunks"


# --- one chunk ------------------------------------------------------------------------------


def test_decode_chunk_at_and_past_max_nbytes():
    chunk = b2store.encode_chunk(np.arange(1000, dtype="<i4"))
    assert len(b2store.decode_chunk(chunk, max_nbytes=4000)) == 4000
    with pytest.raises(LimitError, match="nbytes"):
        b2store.decode_chunk(chunk, max_nbytes=3999)


def test_a_special_chunk_asking_for_2_gib_is_refused_before_allocating():
    # 32 bytes that say "2 GiB of zeros": within c-blosc2's own ceiling, past the default.
    chunk = special_chunk(SpecialValue.NAN, (1 << 31) - 64, 8, blocksize=1 << 20)
    assert len(chunk) == 32
    with pytest.raises(LimitError, match=r"Limits\.max_chunk_nbytes"):
        b2store.decode_chunk(chunk)
    assert peak_of(lambda: b2store.decode_chunk(chunk)) < SMALL
    # At a limit the caller raised, the same chunk decodes (checked on a smaller one).
    small = special_chunk(SpecialValue.NAN, 1 << 20, 8)
    assert np.isnan(b2store.decode_chunk(small, max_nbytes=1 << 20).view("<f8")).all()
    with pytest.raises(LimitError, match=r"Limits\.max_chunk_nbytes"):
        b2store.decode_chunk(small, max_nbytes=(1 << 20) - 1)


def test_frame_chunks_at_and_past_max_chunk_nbytes():
    data = frame_bytes(2, 1000)
    with b2store.open(data, limits=Limits(max_chunk_nbytes=4000)) as s:
        assert (s.decompress_chunk(1).view("<i4") == 1).all()
    with b2store.open(data, limits=Limits(max_chunk_nbytes=3999)) as s:
        with pytest.raises(LimitError, match=r"Limits\.max_chunk_nbytes"):
            s.decompress_chunk(1)


# --- the frame --------------------------------------------------------------------------------


def test_nchunks_at_and_past_the_limit():
    data = frame_bytes(5)
    with b2store.open(data, limits=Limits(max_nchunks=5)) as s:
        assert s.nchunks == 5
    with pytest.raises(LimitError, match="nchunks"):
        b2store.open(data, limits=Limits(max_nchunks=4))


def test_a_header_claiming_2_40_chunks_is_refused_before_its_index_is_decoded():
    data = with_header(frame_bytes(3, 1000), nbytes=1 << 40, chunksize=1)
    with pytest.raises(LimitError, match="nchunks"):
        b2store.open(data)
    assert peak_of(lambda: b2store.open(data)) < SMALL


def test_frame_nbytes_at_and_past_the_limit():
    data = frame_bytes(3, 1000)
    with b2store.open(data, limits=Limits(max_frame_nbytes=12000)) as s:
        assert s.nbytes == 12000
    with pytest.raises(LimitError, match="nbytes"):
        b2store.open(data, limits=Limits(max_frame_nbytes=11999))


def test_header_and_metalayers_at_and_past_the_limit():
    s = SChunk.create(None, typesize=1, meta={"big": bytes(5000)})
    s.append_data(b"x" * 100)
    data = s.to_cframe()
    header_len, _ = FrameHeader.peek_len(data[:24])
    with b2store.open(data, limits=Limits(max_metalayer_nbytes=header_len)) as ok:
        assert ok.meta.raw("big") == bytes(5000)
    with pytest.raises(LimitError, match="header_len"):
        b2store.open(data, limits=Limits(max_metalayer_nbytes=header_len - 1))


def test_vlmeta_entry_at_and_past_the_limit():
    value = "v" * 10_000
    data = frame_bytes(1, vlmeta={"note": value})
    with b2store.open(data) as s:
        stored = len(s._raw_vlmeta["note"])
        decoded = len(b2store.decode_chunk(s._raw_vlmeta["note"]))
    size = max(stored, decoded)
    with b2store.open(data, limits=Limits(max_vlmeta_nbytes=size)) as s:
        assert s.vlmeta["note"] == value
    with b2store.open(data, limits=Limits(max_vlmeta_nbytes=size - 1)) as s:
        with pytest.raises(LimitError, match="vlmeta|nbytes"):
            s.vlmeta["note"]


# --- arrays -----------------------------------------------------------------------------------


def test_ndim_at_and_past_the_limit():
    data = b2store.asarray(np.zeros((2, 3, 4), "i2")).schunk.to_cframe()
    with b2store.open(data, limits=Limits(max_ndim=3)) as a:
        assert a.ndim == 3
    with pytest.raises(LimitError, match="ndim"):
        b2store.open(data, limits=Limits(max_ndim=2))


def test_b2nd_chunk_size_at_and_past_the_limit():
    arr = b2store.asarray(np.arange(400, dtype="<f8").reshape(20, 20), chunks=(10, 10))
    data = arr.schunk.to_cframe()
    per_chunk = 10 * 10 * 8
    with b2store.open(data, limits=Limits(max_chunk_nbytes=per_chunk)) as a:
        np.testing.assert_array_equal(a[...], np.arange(400.0).reshape(20, 20))
    with pytest.raises(LimitError, match="chunk nbytes"):
        b2store.open(data, limits=Limits(max_chunk_nbytes=per_chunk - 1))


def test_limits_survive_pickling():
    import pickle

    limits = Limits(max_nchunks=7)
    with b2store.open(frame_bytes(3), limits=limits) as s:
        assert pickle.loads(pickle.dumps(s)).limits == limits


# --- every LimitError names the limit to raise --------------------------------------------------


def _tree_dir(tmp_path) -> str:
    root = tmp_path / "t.b2d"
    root.mkdir()
    for name in ("a", "b", "c"):
        b2store.asarray(np.arange(4), str(root / f"{name}.b2nd"))
    return str(root)


def _tree_zip(tmp_path) -> str:
    import zipfile

    frame = b2store.asarray(np.arange(4)).schunk.to_cframe()
    path = tmp_path / "t.b2z"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name in ("a", "b", "c"):
            z.writestr(f"{name}.b2nd", frame)
    return str(path)


def _tree_zip_deflated(tmp_path) -> str:
    import zipfile

    frame = b2store.asarray(np.arange(4)).schunk.to_cframe()
    path = tmp_path / "m.b2z"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a.b2nd", frame, compress_type=zipfile.ZIP_STORED)
        z.writestr("dataset.json", b"{}" * 5000, compress_type=zipfile.ZIP_DEFLATED)
    return str(path)


def _deep_tree_dir(tmp_path) -> str:
    root = tmp_path / "deep.b2d"
    leaf = root.joinpath(*"abcdef")  # six group levels
    leaf.mkdir(parents=True)
    b2store.asarray(np.arange(4), str(leaf / "x.b2nd"))
    return str(root)


def _compressible_vlmeta() -> bytes:
    # Stored small, decoded large: the decoded size is what max_vlmeta_nbytes must bound, and
    # the chunk limit must not be the one named (it was: issue 19, item 17).
    return frame_bytes(1, vlmeta={"note": "v" * 100_000})


# (the tight limit, a factory for the input, what a user does with it)
WALK = [
    ("max_chunk_nbytes", lambda p: frame_bytes(2, 1000), lambda s: s.decompress_chunk(1), 100),
    ("max_nchunks", lambda p: frame_bytes(5), None, 2),
    ("max_frame_nbytes", lambda p: frame_bytes(3, 1000), None, 100),
    ("max_metalayer_nbytes", lambda p: frame_bytes(1), None, 10),
    ("max_vlmeta_nbytes", lambda p: _compressible_vlmeta(), lambda s: s.vlmeta["note"], 50_000),
    ("max_vlmeta_nbytes", lambda p: _compressible_vlmeta(), lambda s: dict(s.vlmeta), 10),
    ("max_vlmeta_items", lambda p: frame_bytes(1, vlmeta={"v": list(range(100))}),
     lambda s: s.vlmeta["v"], 10),
    ("max_ndim", lambda p: b2store.asarray(np.zeros((2, 2, 2))).schunk.to_cframe(), None, 1),
    ("max_tree_members", _tree_dir, "tree", 2),
    ("max_tree_members", _tree_zip, "tree", 2),
    ("max_member_nbytes", _tree_zip_deflated, "tree", 100),
    ("max_tree_depth", _deep_tree_dir, "tree", 3),
]  # fmt: skip


@pytest.mark.parametrize("case", WALK, ids=[f"{c[0]}-{i}" for i, c in enumerate(WALK)])
def test_each_limit_error_names_the_limit_that_lets_the_input_through(tmp_path, case):
    """Tighten one limit; the error names a limit; raising *that* one lets the input in."""
    field, make, use, tight = case
    data = make(tmp_path)

    def attempt(limits: Limits) -> None:
        if use == "tree":
            tree = b2store.open_tree(data, limits=limits)
            for ref in tree.arrays().values():
                ref.open()[...]
            for name in tree.files():
                tree.read_file(name)
            return
        with b2store.open(data, limits=limits) as obj:
            if use is not None:
                use(obj.schunk if hasattr(obj, "schunk") else obj)

    limits = Limits(**{field: tight})
    with pytest.raises(LimitError, match=rf"Limits\.{field};"):
        attempt(limits)
    # Raised to what the file asked for, the named limit lets the input through: at once, or
    # after a second check of the same limit (a vlmeta value's stored bytes, then its decoded
    # bytes), or after doubling (a count that stops at the limit reports the limit plus one).
    # Only ``field`` is tight, so every error must name it.
    for _ in range(10):
        try:
            attempt(limits)
            return
        except LimitError as exc:
            assert exc.limit_name == field, str(exc)
            assert f"Limits.{field}" in str(exc)
            assert exc.found > getattr(limits, field)
            limits = limits.replace(**{field: max(exc.found, 2 * getattr(limits, field))})
    pytest.fail(f"raising {field} ten times did not let the input through")


def test_the_chunk_limit_does_not_bound_vlmeta_and_vice_versa():
    data = _compressible_vlmeta()
    with b2store.open(data, limits=Limits(max_chunk_nbytes=50_000)) as s:
        assert s.vlmeta["note"] == "v" * 100_000  # the vlmeta limit is the one that applies
