"""Containers whose bytes lie (block sizes, item counts, payloads that are no msgpack or not
what the metalayer says) raise FormatError naming the field, never a wrong item or a foreign
exception."""

from __future__ import annotations

import msgpack
import pytest

import b2store
from b2store.errors import FormatError
from b2store.limits import LimitError, Limits

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the files under test")

BATCH_META = {"batcharray": {"version": 1, "serializer": "msgpack", "items_per_block": 2}}
OBJECT_META = {"vlarray": {"version": 1, "serializer": "msgpack"}}


def _frame(path, meta, chunks, lengths=None) -> str:
    schunk = blosc2.SChunk(chunksize=-1, urlpath=str(path), mode="w", meta=meta)
    for chunk in chunks:
        schunk.append_chunk(chunk)
    if lengths is not None:
        schunk.vlmeta["_batch_array_metadata"] = {"batch_lengths": lengths}
    return str(path)


def _vl(*payloads) -> bytes:
    return blosc2.blosc2_ext.vlcompress(list(payloads), codec=blosc2.Codec.LZ4, clevel=5)


def test_lying_block_size_in_a_vl_chunk(tmp_path):
    ba = blosc2.BatchArray(urlpath=str(tmp_path / "b.b2b"), mode="w", items_per_block=1)
    ba.append(["abc", "defgh"])
    with b2store.open(tmp_path / "b.b2b") as got:
        _, start, _ = got.schunk.chunk_span(0)
        bstart = int.from_bytes(got.schunk.get_chunk(0)[32:36], "little")
    raw = bytearray((tmp_path / "b.b2b").read_bytes())
    raw[start + bstart : start + bstart + 4] = (10**6).to_bytes(4, "little")
    (tmp_path / "b.b2b").write_bytes(bytes(raw))
    with b2store.open(tmp_path / "b.b2b") as got:
        with pytest.raises(FormatError, match=r"block_nbytes of chunk 0.*adding up to nbytes"):
            got[0]


@pytest.mark.parametrize(
    ("chunks", "lengths", "message"),
    [
        ([_vl(msgpack.packb(5))], None, r"BatchArray batch 0 block 0: expected a msgpack list"),
        ([_vl(b"\xc1\x00")], None, r"BatchArray batch 0 block 0: expected one msgpack value"),
        ([_vl(msgpack.packb([1, 2, 3]))], None, r"block 0: expected 2 items \(items_per_block\)"),
        ([_vl(msgpack.packb([1]), msgpack.packb([2]))], None, r"block 0: expected 2 items"),
        ([_vl(msgpack.packb([1, 2]))], [7], r"batch_lengths\[0\]: expected the 2 items"),
        ([_vl(msgpack.packb([1, 2]))], [2, 2], r"batch_lengths: expected 1 positive item counts"),
        ([blosc2.compress2(msgpack.packb([1, 2]))], None, r"expected a chunk of variable-length"),
    ],
)  # fmt: skip
def test_lying_batch_arrays(tmp_path, chunks, lengths, message):
    path = _frame(tmp_path / "b.b2b", BATCH_META, chunks, lengths)
    with pytest.raises(FormatError, match=message):
        with b2store.open(path) as got:  # (a batch count that lies: refused on opening)
            got[0]
    with pytest.raises(FormatError, match=message):
        with b2store.open(path) as got:  # one item, read from its block alone where it can
            got.items[-1]


@pytest.mark.parametrize(
    ("chunk", "message"),
    [
        (blosc2.compress2(b"\x92\x01"), r"ObjectArray item 0: expected one msgpack value"),
        (blosc2.compress2(b"\x93\x01\x02\x03\x04"), r"ObjectArray item 0: expected one msgpack"),
        (
            _vl(msgpack.packb(1)),
            r"blosc2_flags2 of chunk 0 at offset 31: expected a chunk of fixed",
        ),
        (
            blosc2.compress2(msgpack.packb(msgpack.ExtType(46, msgpack.packb({"shape": [4]})))),
            r"ObjectArray item 0: vlmeta ndarray dtype",
        ),
    ],
)
def test_lying_object_arrays(tmp_path, chunk, message):
    with b2store.open(_frame(tmp_path / "o.b2f", OBJECT_META, [chunk])) as got:
        with pytest.raises(FormatError, match=message):
            got[0]


def test_payload_bombs_stopped_by_limits(tmp_path):
    # one object a byte at most: a million empty lists is bounded by the chunk's size
    bomb = b"\xdd\x00\x0f\x42\x40" + b"\x90" * 1_000_000
    path = _frame(tmp_path / "o.b2f", OBJECT_META, [blosc2.compress2(bomb)])
    with b2store.open(path, limits=Limits(max_chunk_nbytes=100_000)) as got:
        with pytest.raises(LimitError, match="max_chunk_nbytes"):
            got[0]
    # sets inside sets: each level decodes a copy of the bytes below it
    nested = msgpack.packb(list(range(3000)))
    for _ in range(30):
        nested = msgpack.packb(msgpack.ExtType(45, nested))
    path = _frame(tmp_path / "n.b2f", OBJECT_META, [blosc2.compress2(nested)])
    with b2store.open(path, limits=Limits(max_vlmeta_nbytes=100_000)) as got:
        with pytest.raises(LimitError, match="max_vlmeta_nbytes"):
            got[0]


def test_truncated_container_frame(tmp_path):
    ba = blosc2.BatchArray(urlpath=str(tmp_path / "b.b2b"), mode="w")
    ba.extend([["x" * 100, 1], [2.5]])
    raw = (tmp_path / "b.b2b").read_bytes()
    (tmp_path / "b.b2b").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(FormatError):
        b2store.open(tmp_path / "b.b2b")


def test_batch_meta_without_items_per_block_reads(tmp_path):
    # python-blosc2 reads a missing items_per_block as None (batch_array.py _attach_schunk);
    # a mutant of the fuzz seeds found b2store's KeyError here
    meta = {"batcharray": {"version": 1, "serializer": "msgpack"}}
    chunk = _vl(msgpack.packb([1, 2, 3]), msgpack.packb(["x"]))
    with b2store.open(_frame(tmp_path / "b.b2b", meta, [chunk])) as got:
        assert got.items_per_block is None
        assert got[0] == [1, 2, 3, "x"]
