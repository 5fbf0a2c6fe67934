"""Helpers the tests share: where the reference corpus is, and NumPy references of the kernels.

The references are written from the format's definitions, as plainly as NumPy allows, so that
the Cython kernels have something independent to be compared against.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CORPUS = SHARED / "corpus"


def corpus_absent_reason(path: Path) -> str:
    return f"reference corpus not found at {path} (it sits beside the checkout; CI always has it)"


def corpus_dir(name: str) -> Path:
    """``../shared/corpus/<name>``, or skip: the corpus lives beside the checkout, not in it."""
    path = CORPUS / name
    if not (path / "manifest.json").is_file():
        pytest.skip(corpus_absent_reason(path))
    return path


class AbsentCorpus(dict):
    """The one case a corpus folder that is not there stands for: the tests parametrized with
    it skip and say why (conftest marks them), rather than pytest's "got empty parameter set"."""


def corpus_cases(name: str, kinds: set[str], where=None) -> list[dict]:
    """The manifest cases of one corpus folder whose kind is in ``kinds`` (and for which
    ``where(case)`` holds, if given); one `AbsentCorpus` case if the folder is absent."""
    manifest = CORPUS / name / "manifest.json"
    if not manifest.is_file():
        return [AbsentCorpus(name="corpus-absent", kind=None, path=str(CORPUS / name))]
    cases = [c for c in json.loads(manifest.read_text())["cases"] if c["kind"] in kinds]
    return [c for c in cases if where is None or where(c)]


def holds_absent_corpus(value) -> bool:
    if isinstance(value, AbsentCorpus):
        return True
    return isinstance(value, tuple | list) and any(isinstance(v, AbsentCorpus) for v in value)


def assert_same_bytes(ours, theirs, context=None) -> None:
    """``ours == theirs``, reported by lengths and the first differing offset: a plain assert
    on two chunks that differ makes pytest diff them byte by byte (minutes for 200 kB).
    (This module is not assertion-rewritten, so the comparison here stays a plain one.)"""
    ours, theirs = bytes(ours), bytes(theirs)
    if ours == theirs:
        return
    first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
    if first is None:
        first = min(len(ours), len(theirs))
    raise AssertionError(
        f"{context}: {len(ours)} bytes != {len(theirs)} bytes, first difference at {first}: "
        f"{ours[first : first + 16].hex()} != {theirs[first : first + 16].hex()}"
    )


def case_id(case: dict) -> str:
    return case["name"]


def recipe(expected: dict) -> np.ndarray:
    """The compat manifest's recipe: int32 LE arange(n) * k for k in factors, cut to nbytes."""
    parts = [
        (np.arange(expected["n"], dtype="<i4") * k).tobytes() for k in expected.get("factors", [1])
    ]
    data = b"".join(parts)
    return np.frombuffer(data[: expected.get("nbytes", len(data))], np.uint8)


# --- NumPy references of the filter kernels ------------------------------------------------


def ref_shuffle(buf: np.ndarray, es: int) -> np.ndarray:
    n = len(buf) // es
    body = buf[: n * es].reshape(n, es).T.reshape(-1)
    return np.concatenate([body, buf[n * es :]])


def ref_unshuffle(buf: np.ndarray, es: int) -> np.ndarray:
    n = len(buf) // es
    body = buf[: n * es].reshape(es, n).T.reshape(-1)
    return np.concatenate([body, buf[n * es :]])


def ref_bitshuffle(buf: np.ndarray, es: int) -> np.ndarray:
    """Row 8*b + k holds bit k of byte b of every element, element e at bit e % 8 of byte e // 8."""
    n = len(buf) // es
    n -= n % 8
    items = buf[: n * es].reshape(n, es)
    bits = np.unpackbits(items, axis=1, bitorder="little")  # (n, 8*es): column 8*b + k
    rows = np.packbits(bits.T, axis=1, bitorder="little")  # (8*es, n/8)
    return np.concatenate([rows.reshape(-1), buf[n * es :]])


def ref_bitunshuffle(buf: np.ndarray, es: int) -> np.ndarray:
    n = len(buf) // es
    n -= n % 8
    rows = buf[: n * es].reshape(8 * es, n // 8)
    bits = np.unpackbits(rows, axis=1, bitorder="little")  # (8*es, n)
    items = np.packbits(bits.T, axis=1, bitorder="little")  # (n, es)
    return np.concatenate([items.reshape(-1), buf[n * es :]])


def _words(buf: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(buf) // width
    dtype = {1: np.uint8, 2: "<u2", 4: "<u4", 8: "<u8"}[width]
    return buf[: n * width].view(dtype), buf[n * width :]


def ref_delta_decode_first(buf: np.ndarray, width: int) -> np.ndarray:
    words, tail = _words(buf, width)
    return np.concatenate([np.bitwise_xor.accumulate(words).view(np.uint8), tail])


def ref_delta_encode_first(buf: np.ndarray, width: int) -> np.ndarray:
    words, tail = _words(buf, width)
    out = words.copy()
    out[1:] ^= words[:-1]
    return np.concatenate([out.view(np.uint8), tail])


def ref_bytedelta_encode(buf: np.ndarray, es: int, buggy: bool = False) -> np.ndarray:
    n = len(buf) // es
    chans = buf[: n * es].reshape(es, n).astype(np.int64)
    prev = np.zeros_like(chans)
    prev[:, 1:] = chans[:, :-1]
    restart = (n // 16) * 16
    if buggy and restart < n:
        prev[:, restart] = 0
    out = ((chans - prev) % 256).astype(np.uint8)
    return np.concatenate([out.reshape(-1), buf[n * es :]])


def ref_bytedelta_decode(buf: np.ndarray, es: int, buggy: bool = False) -> np.ndarray:
    n = len(buf) // es
    chans = buf[: n * es].reshape(es, n).astype(np.int64)
    if buggy and (n // 16) * 16 < n:
        r = (n // 16) * 16
        out = np.concatenate(
            [np.cumsum(chans[:, :r], axis=1), np.cumsum(chans[:, r:], axis=1)], axis=1
        )
    else:
        out = np.cumsum(chans, axis=1)
    return np.concatenate([(out % 256).astype(np.uint8).reshape(-1), buf[n * es :]])


# Where to_b2nd writes, by layout: a file name and the options that choose the layout.
WRITE_LAYOUTS = {
    "frame": ("t.b2nd", {}),
    "sparse": ("t.b2nd", {"contiguous": False}),
    "b2d": ("t.b2d", {}),
    "b2z": ("t.b2z", {}),
}


def other_blosc_blocks(x: np.ndarray, path, chunks, blocks, factor: int):
    """A b2nd array of ``x`` at ``path`` whose every chunk is encoded with Blosc blocks of
    ``factor`` array blocks' bytes (valid Blosc, which python-blosc2 never writes but other
    writers may): the array's block numbers name other bytes in such chunks."""
    import b2store
    from b2store.nd.chunks import cparams_for, encode_array_chunk
    from b2store.nd.geometry import array_to_chunk, chunk_grid

    arr = b2store.asarray(x, path, chunks=chunks, blocks=blocks)
    params = cparams_for(x.dtype, blocks).replace(
        blocksize=factor * int(np.prod(blocks)) * x.dtype.itemsize
    )
    for n, coords in enumerate(np.ndindex(*chunk_grid(x.shape, chunks))):
        part = x[tuple(slice(c * s, (c + 1) * s) for c, s in zip(coords, chunks))]
        chunk = encode_array_chunk(array_to_chunk(part, chunks, blocks), x.dtype, params)
        arr.schunk.update_chunk(n, chunk)
    arr.close()
    return b2store.open(path)


def box_chunks(lo, hi, shape, chunks, blocks):
    """Per chunk a box ``[lo, hi)`` of an array touches, in C order: its number, how many of
    its blocks the box touches, and whether the box takes all of it (up to the array's end).
    What a counter of b2store's box reads (``nd.read_chunks.read_box``) counts."""
    import itertools

    grid = [-(-n // c) for n, c in zip(shape, chunks)]
    per_dim = []
    for a, b, c, bs, n in zip(lo, hi, chunks, blocks, shape):
        entries = []
        for k in range(a // c, (b - 1) // c + 1):
            start, stop = max(a, k * c) - k * c, min(b, k * c + c) - k * c
            whole = start == 0 and stop == min(c, n - k * c)
            entries.append((k, (stop - 1) // bs - start // bs + 1, whole))
        per_dim.append(entries)
    for combo in itertools.product(*per_dim):
        number = int(np.ravel_multi_index(tuple(k for k, _, _ in combo), grid))
        touched = int(np.prod([t for _, t, _ in combo]))
        yield number, touched, all(w for _, _, w in combo)


def plugin_blocks_fit(
    blocks, itemsize: int, codec: str = "zstd", codec_meta: int = 0, filters=(), filters_meta=()
) -> bool:
    """Whether c-blosc2's plugins code blocks of this shape, stated from c-blosc2's plugin
    sources (blosc2-zfp.c, ndlz.c, ndcell.c, ndmean.c) apart from b2store's own checks: ZFP
    takes float32/float64 blocks of 1-4 dimensions, none under 4 long; NDLZ 2-d blocks and
    cells of 4 or 8; NDCELL a cell's ``cell**ndim`` items in the block; NDMEAN floats, and a
    first block side at least the cell unless no other side holds two cells."""
    blocks = tuple(blocks)
    if 0 in blocks:
        return True  # an empty array's: nothing is ever coded
    ndim = len(blocks)
    if codec.startswith("zfp") and not (itemsize in (4, 8) and 1 <= ndim <= 4 and min(blocks) >= 4):
        return False
    if codec == "ndlz" and not (ndim == 2 and codec_meta in (4, 8)):
        return False
    for name, cell in zip(filters, filters_meta):
        if name == "ndcell" and not (1 <= cell <= 255 and cell**ndim <= np.prod(blocks)):
            return False
        if name == "ndmean" and not (
            1 <= cell <= 127
            and itemsize in (4, 8)
            and (blocks[0] >= cell or all(b <= cell for b in blocks[1:]))
        ):
            return False
    return True


def restream(chunk, j: int, change) -> bytes:
    """``chunk`` (a Blosc2 chunk of one stream a block) with block ``j``'s stream replaced by
    ``change(stream)``, laid out again block after block: the block starts, the stream's
    size and cbytes made to agree with it, the header and any dictionary kept. What a writer
    that lies about nothing but that one stream would write."""
    chunk = bytes(chunk)
    nbytes, blocksize = (int.from_bytes(chunk[k : k + 4], "little") for k in (4, 8))
    nblocks = -(-nbytes // blocksize)
    starts = [int.from_bytes(chunk[32 + 4 * i : 36 + 4 * i], "little") for i in range(nblocks)]
    streams = []
    for i, start in enumerate(starts):
        csize = int.from_bytes(chunk[start : start + 4], "little", signed=True)
        assert 0 < csize, "a run (csize < 0) has no stream to change"
        stream = chunk[start + 4 : start + 4 + csize]
        streams.append(change(stream) if i == j else stream)
    prefix = bytearray(chunk[: min(starts)])  # header, block starts, dictionary
    pos, body = len(prefix), b""
    for i, stream in enumerate(streams):
        prefix[32 + 4 * i : 36 + 4 * i] = (pos + len(body)).to_bytes(4, "little")
        body += len(stream).to_bytes(4, "little") + stream
    out = prefix + body
    out[12:16] = len(out).to_bytes(4, "little")
    return bytes(out)


def blosc2_file_with_chunk(path, n: int, chunk) -> None:
    """Chunk ``n`` of python-blosc2's frame file ``path`` replaced by ``chunk``, as it is:
    python-blosc2's own update, which does not decode it."""
    import blosc2

    arr = blosc2.open(str(path), mode="a")
    arr.schunk.update_chunk(n, bytes(chunk))
    del arr


def far_match_block(seed: int, fillers: int, rows: int = 3) -> np.ndarray:
    """One row of 4x4 uint8 cells for NDLZ: a literal cell, 3853 random literal cells,
    ``fillers`` uniform cells, then a cell repeating ``rows`` rows of the first, 65 531..65 534
    stream bytes after it (the offsets c-blosc2's NDLZ decoder wraps)."""
    rng = np.random.default_rng(seed)
    first = rng.integers(0, 256, (4, 4))
    target = rng.integers(0, 256, (4, 4))
    target[:rows] = first[:rows]
    cells = (
        [first]
        + [rng.integers(0, 256, (4, 4)) for _ in range(3853)]
        + [np.full((4, 4), 5)] * fillers
        + [target]
        + [np.full((4, 4), 6)] * 400
    )
    return np.concatenate(cells, axis=1).astype(np.uint8)
