"""The NDCELL / NDMEAN kernels (b2store.chunk._ndcell): against a plain-Python reading of the
filters, against python-blosc2 (c-blosc2's filtered bytes of each block, inflated from its
chunks, and its decoded chunks), and on bad parameters."""

import itertools
import math
import struct

import numpy as np
import pytest

from b2store.chunk import _ndcell

# --- reference: the filters as c-blosc2 describes them, one item at a time --------------


def ref_rows(blockshape, cell, mean):
    """For each cell in c-blosc2's order, its rows as (first item, items)."""
    nd = len(blockshape)
    side = [min(cell, b) for b in blockshape] if mean else [cell] * nd
    grid = [-(-b // s) for b, s in zip(blockshape, side)]
    strides = [math.prod(blockshape[d + 1 :]) for d in range(nd)]
    # NDMEAN places origins with the first dimension's (clamped) side.
    mult = [side[0]] * nd if mean else side
    cells = []
    for ii in itertools.product(*map(range, grid)):
        orig = sum(ii[d] * mult[d] * strides[d] for d in range(nd))
        pad = [
            blockshape[d] % side[d] if blockshape[d] % side[d] and ii[d] == grid[d] - 1 else side[d]
            for d in range(nd)
        ]
        rows = []
        for kk in itertools.product(*map(range, pad[:-1])):
            rows.append((orig + sum(k * strides[d] for d, k in enumerate(kk)), pad[-1]))
        cells.append(rows)
    return cells


def ref_gather(block, blockshape, ts, cell):
    items = np.frombuffer(block, np.uint8).reshape(-1, ts)
    rows = [items[s : s + n] for c in ref_rows(blockshape, cell, False) for s, n in c]
    return np.concatenate(rows).tobytes()


def ref_scatter(data, blockshape, ts, cell, mean):
    items = np.frombuffer(data, np.uint8).reshape(-1, ts)
    out = np.zeros_like(items)
    p = 0
    for c in ref_rows(blockshape, cell, mean):
        for s, n in c:
            out[s : s + n] = items[p : p + n]
            p += n
    return out.tobytes()


UINT = {4: np.uint32, 8: np.uint64}
FLOAT = {4: np.float32, 8: np.float64}
QUIET = {4: 0x00400000, 8: 0x0008000000000000}
DEFAULT_NAN = {4: 0xFFC00000, 8: 0xFFF8000000000000}


def ref_mean_encode(block, blockshape, ts, cell):
    """Each cell's items summed in order in the item type from +0.0 (x86 NaN rules: the
    first NaN met wins, quieted; inf + -inf is the negative default NaN), divided by the
    count, repeated per item."""
    ft, ut = FLOAT[ts], UINT[ts]
    bits = np.frombuffer(block, ut)
    out = []
    for c in ref_rows(blockshape, cell, True):
        idx = [s + k for s, n in c for k in range(n)]
        acc = ft(0)
        nan = False
        for i in idx:
            x = bits[i : i + 1].view(ft)[0]
            if np.isnan(x):
                acc = np.array([int(bits[i]) | QUIET[ts]], ut).view(ft)[0]
                nan = True
                break
            with np.errstate(invalid="ignore", over="ignore"):
                acc = ft(acc + x)
            if np.isnan(acc):
                acc = np.array([DEFAULT_NAN[ts]], ut).view(ft)[0]
                nan = True
                break
        if not nan:
            acc = ft(acc / ft(len(idx)))
        out.append(np.full(len(idx), acc, ft).view(ut))
    return np.concatenate(out).tobytes()


def run(kernel, src, blockshape, ts, cell):
    src = np.frombuffer(src, np.uint8)
    dst = np.full(len(src), 0xA5, np.uint8)
    kernel(src, dst, blockshape, ts, cell)
    return dst.tobytes()


GEOMETRIES = [
    (12,),
    (13,),
    (1,),
    (4, 4),
    (7, 5),
    (2, 10),
    (10, 2),
    (9, 13),
    (1, 17),
    (5, 6, 7),
    (2, 9, 9),
    (8, 3, 4),
    (3, 4, 5, 6),
    (2, 2, 9, 5),
    (2, 2, 2, 2, 2, 2, 2, 3),
]


def geometry_cases(mean):
    for shape in GEOMETRIES:
        for cell in (1, 2, 3, 4, 5, 8):
            if mean or cell ** len(shape) <= math.prod(shape):
                yield shape, cell


@pytest.mark.parametrize(("shape", "cell"), list(geometry_cases(False)))
@pytest.mark.parametrize("ts", [1, 2, 4, 8, 3])
def test_ndcell_matches_reference(shape, cell, ts):
    block = np.random.default_rng(len(shape) * 100 + cell).bytes(math.prod(shape) * ts)
    enc = run(_ndcell.ndcell_encode, block, shape, ts, cell)
    assert enc == ref_gather(block, shape, ts, cell)
    assert run(_ndcell.ndcell_decode, enc, shape, ts, cell) == block


def mean_fixable(shape, cell):
    """False where c-blosc2's NDMEAN decoder refuses (first side < cell, later grid > 1)."""
    side0 = min(cell, shape[0])
    return all(min(cell, b) == side0 or -(-b // min(cell, b)) == 1 for b in shape[1:])


def float_block(rng, n, ts, kind):
    ft, ut = FLOAT[ts], UINT[ts]
    if kind == "normal":
        return (rng.standard_normal(n) * 1000).astype(ft).tobytes()
    if kind == "special":
        x = rng.standard_normal(n).astype(ft)
        x[rng.integers(0, n, n // 5)] = np.inf
        x[rng.integers(0, n, n // 5)] = -np.inf
        x[rng.integers(0, n, n // 7)] = np.nan
        return x.tobytes()
    return rng.integers(0, np.iinfo(ut).max, n, ut, endpoint=True).tobytes()  # any bits


@pytest.mark.parametrize(("shape", "cell"), list(geometry_cases(True)))
@pytest.mark.parametrize("ts", [4, 8])
@pytest.mark.parametrize("kind", ["normal", "special", "bits"])
def test_ndmean_matches_reference(shape, cell, ts, kind):
    rng = np.random.default_rng(len(shape) * 100 + cell)
    block = float_block(rng, math.prod(shape), ts, kind)
    enc = run(_ndcell.ndmean_encode, block, shape, ts, cell)
    assert enc == ref_mean_encode(block, shape, ts, cell)
    if mean_fixable(shape, cell):
        dec = run(_ndcell.ndmean_decode, enc, shape, ts, cell)
        assert dec == ref_scatter(enc, shape, ts, cell, True)
        # Read back: every cell is flat, and a cell without NaN holds its mean.
        if kind == "normal":
            x = np.frombuffer(block, FLOAT[ts])
            y = np.frombuffer(dec, FLOAT[ts])
            for c in ref_rows(shape, cell, True):
                idx = [s + k for s, n in c for k in range(n)]
                assert np.all(y[idx] == y[idx[0]])
                np.testing.assert_allclose(y[idx[0]], x[idx].mean(), rtol=1e-3, atol=1e-2)
    else:
        with pytest.raises(ValueError, match="cannot decode"):
            run(_ndcell.ndmean_decode, enc, shape, ts, cell)


def test_ndmean_nan_rules():
    """The NaN results c-blosc2 gives on x86 (checked against python-blosc2 4.14.1)."""
    x = np.full(24, np.float32(1.5).view(np.uint32), np.uint32)
    x[1] = 0x7F800001  # a signalling NaN comes out quieted
    x[4], x[5] = 0x7F800000, 0xFF800000  # inf + -inf: the negative default NaN
    x[8], x[9] = 0xFF800000, 0x7FC00005  # -inf, then a NaN: that NaN
    x[12], x[13] = 0x7FA00003, 0xFFC00007  # two NaNs: the first one, quieted
    x[16], x[17] = 0xFFC00007, 0x7FA00003
    enc = np.frombuffer(run(_ndcell.ndmean_encode, x.tobytes(), (24,), 4, 4), np.uint32)
    got = [int(v) for v in enc[::4]]
    assert got == [0x7FC00001, 0xFFC00000, 0x7FC00005, 0x7FE00003, 0xFFC00007, 0x3FC00000]
    y = np.full(8, np.float64(1.5).view(np.uint64), np.uint64)
    y[1] = 0x7FF0000000000001
    y[4], y[5] = 0x7FF0000000000000, 0xFFF0000000000000
    enc = np.frombuffer(run(_ndcell.ndmean_encode, y.tobytes(), (8,), 8, 4), np.uint64)
    assert [int(v) for v in enc[::4]] == [0x7FF8000000000001, 0xFFF8000000000000]


def test_ndmean_sums_in_item_type():
    # 2**24 + 1 + 1 + ... is 2**24 in float32 arithmetic, not 2**24 + 3.
    x = np.array([2.0**24, 1, 1, 1], np.float32)
    enc = np.frombuffer(run(_ndcell.ndmean_encode, x.tobytes(), (4,), 4, 4), np.float32)
    assert enc[0] == np.float32(2.0**24 / 4)


def test_identity_geometries_are_copies():
    # Cells spanning every dimension but the first follow one another in memory.
    block = np.random.default_rng(1).bytes(6 * 4 * 3 * 2)
    for shape, cell in [((6, 4, 3), 4), ((24, 3), 3), ((72,), 5)]:
        assert run(_ndcell.ndcell_encode, block, shape, 2, cell) == block


# --- parameters and hostile input ----------------------------------------------------------

ALL = [_ndcell.ndcell_encode, _ndcell.ndcell_decode, _ndcell.ndmean_encode, _ndcell.ndmean_decode]


@pytest.mark.parametrize("kernel", ALL)
@pytest.mark.parametrize(
    ("nbytes", "shape", "ts", "cell", "match"),
    [
        (64, (4, 4), 4, 0, "cell side"),
        (64, (4, 4), 4, -1, "cell side"),
        (64, (4, 4), 4, 256, "cell side"),
        (64, (4, 4), 4, 4, None),  # ok: the control
        (60, (4, 4), 4, 2, "needs 64"),
        (68, (4, 4), 4, 2, "needs 64"),
        (64, (), 4, 2, "dimensions"),
        (512 * 4, (2,) * 9, 4, 1, "dimensions"),
        (64, (4, 0, 4), 4, 2, "block sides"),
        (64, (-4, -4), 4, 2, "block sides"),
        (64, (4, 4), 0, 2, "typesize"),
        (2**40, (2**20, 2**20), 4, 2, "needs"),
        (64, (2**70,), 4, 2, "needs"),
        (64, (2**70, 2**70, 2**70), 4, 2, "needs"),
        (64, (4, 4), 2**70, 2, "needs|typesize 4 or 8|1..127"),
        (64, (4, 4), 4, 2**70, "cell side"),
    ],
)
def test_bad_parameters(kernel, nbytes, shape, ts, cell, match):
    n = min(nbytes, 4096)
    src, dst = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
    if match is None:
        kernel(src, dst, shape, ts, cell)
        return
    with pytest.raises(ValueError, match=match):
        kernel(src, dst, shape, ts, cell)


@pytest.mark.parametrize("kernel", ALL)
def test_buffer_checks(kernel):
    buf = np.zeros(128, np.uint8)
    with pytest.raises(ValueError, match="destination"):
        kernel(buf[:64], np.zeros(60, np.uint8), (4, 4), 4, 2)
    with pytest.raises(ValueError, match="overlap"):
        kernel(buf[:64], buf[:64], (4, 4), 4, 2)
    with pytest.raises(ValueError, match="overlap"):
        kernel(buf[:64], buf[32:96], (4, 4), 4, 2)
    with pytest.raises(ValueError, match="empty"):
        kernel(buf[:0], buf[64:64], (4, 4), 4, 2)
    kernel(buf[:64], buf[64:], (4, 4), 4, 2)  # adjacent halves are fine


def test_filter_specific_limits():
    z = np.zeros(4096, np.uint8)
    # NDCELL: cell up to 255 (unsigned meta byte) but cell**ndim must fit in the block.
    _ndcell.ndcell_encode(z[:1000], z[1000:2000], (1000,), 1, 255)
    with pytest.raises(ValueError, match="larger than the block"):
        _ndcell.ndcell_encode(z[:36], z[36:72], (3, 3), 4, 4)
    with pytest.raises(ValueError, match="larger than the block"):
        _ndcell.ndcell_decode(z[:36], z[36:72], (3, 3), 4, 4)
    # NDMEAN clamps the cell to the block instead, reads the meta byte as int8, encodes
    # float32/float64 only and decodes typesizes up to 127.
    _ndcell.ndmean_encode(z[:36], z[36:72], (3, 3), 4, 4)
    _ndcell.ndmean_encode(z[:1000], z[1000:2000], (125,), 8, 127)
    with pytest.raises(ValueError, match="cell side"):
        _ndcell.ndmean_encode(z[:1000], z[1000:2000], (250,), 4, 128)
    with pytest.raises(ValueError, match="cell side"):
        _ndcell.ndmean_decode(z[:1000], z[1000:2000], (250,), 4, 128)
    for ts in (1, 2, 3, 16):
        with pytest.raises(ValueError, match="typesize 4 or 8"):
            _ndcell.ndmean_encode(z[: 16 * ts], z[2048 : 2048 + 16 * ts], (16,), ts, 4)
        _ndcell.ndmean_decode(z[: 16 * ts], z[2048 : 2048 + 16 * ts], (16,), ts, 4)
    _ndcell.ndmean_decode(z[:127], z[2048 : 2048 + 127], (1,), 127, 4)
    with pytest.raises(ValueError, match="1..127"):
        _ndcell.ndmean_decode(z[:128], z[2048 : 2048 + 128], (1,), 128, 4)


def test_random_bytes_decode():
    rng = np.random.default_rng(7)
    for _ in range(200):
        nd = int(rng.integers(1, 5))
        shape = tuple(int(v) for v in rng.integers(1, 12, nd))
        ts = int(rng.choice([1, 2, 4, 8]))
        cell = int(rng.integers(1, 10))
        n = math.prod(shape) * ts
        src = np.frombuffer(rng.bytes(n), np.uint8)
        dst = np.empty(n, np.uint8)
        if cell**nd <= math.prod(shape):
            _ndcell.ndcell_decode(src, dst, shape, ts, cell)
            assert sorted(dst.reshape(-1, ts).tolist()) == sorted(src.reshape(-1, ts).tolist())
        if mean_fixable(shape, cell):
            _ndcell.ndmean_decode(src, dst, shape, ts, cell)
            assert dst.tobytes() == ref_scatter(src.tobytes(), shape, ts, cell, True)
        if ts in (4, 8):
            _ndcell.ndmean_encode(src, dst, shape, ts, cell)


# --- python-blosc2 as the oracle ---------------------------------------------------------


def blosc2_blocks(chunk):
    """c-blosc2's filtered bytes of each block of a non-split chunk (None if memcpyed)."""
    zstandard = pytest.importorskip("zstandard")
    lz4_block = pytest.importorskip("lz4.block")
    _, _, flags, _, nbytes, bs, _ = struct.unpack_from("<BBBBiii", chunk)
    assert flags & 0x10, "the oracle arrays are written with NEVER_SPLIT"
    if flags & 0x02:
        return None, bs
    codec = flags >> 5
    nblocks = -(-nbytes // bs)
    out = []
    for start in struct.unpack_from(f"<{nblocks}i", chunk, 32):
        csize = struct.unpack_from("<i", chunk, start)[0]
        payload = bytes(chunk[start + 4 : start + 4 + max(csize, 0)])
        if csize == 0:
            out.append(bytes(bs))
        elif csize < 0:
            out.append(bytes([-csize & 0xFF]) * bs)
        elif csize == bs:
            out.append(payload)
        elif codec == 1:
            out.append(lz4_block.decompress(payload, uncompressed_size=bs))
        else:
            assert codec == 4
            out.append(zstandard.ZstdDecompressor().decompress(payload, max_output_size=bs))
    return out, bs


def oracle(x, chunks, blocks, filt, meta, codec_name="ZSTD"):
    """Encode and decode every block of ``x`` with our kernels and compare with
    python-blosc2; returns (blocks compared, blocks python-blosc2 could not decode)."""
    blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the NDCELL/NDMEAN oracle")

    def cparams(f, m):
        return dict(
            codec=getattr(blosc2.Codec, codec_name),
            clevel=5,
            filters=[f],
            filters_meta=[m],
            splitmode=blosc2.SplitMode.NEVER_SPLIT,
            nthreads=1,
        )

    kw = dict(chunks=chunks, blocks=blocks, dparams=dict(nthreads=1))
    arr = blosc2.asarray(x, cparams=cparams(getattr(blosc2.Filter, filt), meta), **kw)
    plain = blosc2.asarray(x, cparams=cparams(blosc2.Filter.NOFILTER, 0), **kw)
    blockshape, ts, cell = tuple(arr.blocks), x.itemsize, meta & 0xFF
    enc = _ndcell.ndcell_encode if filt == "NDCELL" else _ndcell.ndmean_encode
    dec = _ndcell.ndcell_decode if filt == "NDCELL" else _ndcell.ndmean_decode
    compared = refused = 0
    for i in range(arr.schunk.nchunks):
        raw = plain.schunk.decompress_chunk(i)
        try:
            theirs = arr.schunk.decompress_chunk(i)
        except RuntimeError:
            theirs = None
        filtered, bs = blosc2_blocks(arr.schunk.get_chunk(i))
        if filtered is None:  # stored memcpyed: c-blosc2 ran no filter at all
            assert theirs == raw
            continue
        for j, theirs_filtered in enumerate(filtered):
            block = raw[j * bs : (j + 1) * bs]
            assert run(enc, block, blockshape, ts, cell) == theirs_filtered, (i, j)
            compared += 1
            if theirs is None:
                with pytest.raises(ValueError):
                    run(dec, theirs_filtered, blockshape, ts, cell)
                refused += 1
            else:
                got = run(dec, theirs_filtered, blockshape, ts, cell)
                assert got == theirs[j * bs : (j + 1) * bs], (i, j)
    return compared, refused


ORACLE_GEOMETRIES = [
    ((200,), (120,), (50,)),
    ((40, 37), (24, 22), (14, 10)),
    ((40, 37), (40, 37), (16, 12)),
    ((2, 400), (2, 400), (2, 10)),
    ((400, 2), (400, 2), (10, 2)),
    ((19, 20, 21), (19, 20, 21), (9, 10, 11)),
    ((30, 8, 5), (30, 8, 5), (11, 8, 5)),
    ((8, 9, 10, 11), (8, 9, 10, 11), (5, 4, 5, 6)),
]


@pytest.mark.parametrize(("shape", "chunks", "blocks"), ORACLE_GEOMETRIES)
@pytest.mark.parametrize("dtype", ["u1", "i2", "i4", "i8"])
def test_ndcell_against_blosc2(shape, chunks, blocks, dtype):
    rng = np.random.default_rng(3)
    # Runs of equal values: compressible even in tiny blocks, so no memcpyed chunks.
    n = math.prod(shape)
    x = np.repeat(rng.integers(0, 200, n // 8 + 1), 8)[:n].astype(dtype).reshape(shape)
    compared = 0
    for cell in (1, 2, 3, 4, 5, 8):
        if cell ** len(blocks) <= math.prod(blocks):
            codec = "LZ4" if cell % 2 else "ZSTD"
            compared += oracle(x, chunks, blocks, "NDCELL", cell, codec)[0]
    # Blocks under 32 bytes never beat their 8 bytes of overhead: c-blosc2 stores such
    # chunks memcpyed (no filter run), which oracle() checks instead.
    assert compared > 0 or math.prod(blocks) * x.itemsize < 32


def test_ndcell_against_blosc2_wide_cells():
    x = (np.arange(3000, dtype=np.int32) % 97).reshape(3000)
    # Meta 200 (python-blosc2 takes the meta as int8: -56 is the byte 200).
    assert oracle(x, (3000,), (1000,), "NDCELL", -56)[0] == 3
    y = (np.arange(900, dtype=np.int64) % 7).reshape(30, 30)
    assert oracle(y, (30, 30), (15, 30), "NDCELL", 16)[0] == 2


@pytest.mark.parametrize(("shape", "chunks", "blocks"), ORACLE_GEOMETRIES)
@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("kind", ["normal", "smooth", "special", "bits"])
def test_ndmean_against_blosc2(shape, chunks, blocks, dtype, kind):
    rng = np.random.default_rng(4)
    ts = np.dtype(dtype).itemsize
    n = math.prod(shape)
    if kind == "smooth":
        x = np.sin(np.indices(shape).sum(0) / 7).astype(dtype)
    else:
        x = np.frombuffer(float_block(rng, n, ts, kind), dtype).reshape(shape)
    compared = refused = 0
    for cell in (1, 2, 3, 4, 7, 8, 127):
        c, r = oracle(x, chunks, blocks, "NDMEAN", cell)
        compared += c
        refused += r
    assert compared > 0
    # Only the (2, 10) blocks with cells wider than 2 are undecodable in c-blosc2.
    assert (refused > 0) == (blocks == (2, 10))


@pytest.mark.parametrize(
    ("shape", "dtype", "filt"), [((13, 13), "i4", "NDMEAN"), ((10, 10), "i8", "NDCELL")]
)
def test_python_blosc2_lossy_cases(shape, dtype, filt):
    """python-blosc2's own test_lossy cases (its default chunks and blocks): integers
    through NDMEAN are averaged as the floats their bits spell."""
    blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the NDCELL/NDMEAN oracle")
    x = np.linspace(0, math.prod(shape), math.prod(shape), dtype=dtype).reshape(shape)
    cparams = {"filters": [getattr(blosc2.Filter, filt)], "filters_meta": [4]}
    probe = blosc2.asarray(x, cparams=cparams)
    chunks, blocks = tuple(probe.chunks), tuple(probe.blocks)
    assert oracle(x, chunks, blocks, filt, 4) == (math.prod(chunks) // math.prod(blocks), 0)
