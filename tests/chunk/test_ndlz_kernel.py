"""The NDLZ kernel (b2store.chunk._ndlz, c-blosc2's codec 32): streams byte-identical to c-blosc2's
in both directions, and a decoder that answers any hostile stream with -1 and nothing worse.

The oracle tests write b2nd arrays with python-blosc2 and take the chunks apart here (header,
bstarts, one csize + payload per stream), so they depend on nothing else in b2store.
"""

import struct

import numpy as np
import pytest
from helpers import far_match_block

from b2store.chunk import _ndlz

BLOCKSHAPES = [(32, 18), (10, 7), (64, 64), (100, 33), (16, 16), (8, 40)]


# --- helpers ---------------------------------------------------------------------------------


def cell_kinds(stream, cell):
    """Count the cell kinds of a stream by walking its tokens (checks the layout too)."""
    bs0, bs1 = struct.unpack_from("<ii", stream, 1)
    nr, nc = -(-bs0 // cell), -(-bs1 // cell)
    pos, kinds = 9, {}
    for r in range(nr):
        rows = bs0 % cell if r == nr - 1 and bs0 % cell else cell
        for c in range(nc):
            cols = bs1 % cell if c == nc - 1 and bs1 % cell else cell
            t = stream[pos]
            if t == 0:
                kind, size = "literal", 1 + rows * cols
            elif t == 64:
                kind, size = "uniform", 2
            elif t == 192:
                kind, size = "cell", 3
            elif cell == 4 and t >= 224:
                kind, size = "triple", 7
            elif cell == 4 and 128 <= t <= 191:
                kind, size = "pair", 11
            elif cell == 4 and 40 <= t <= 63:
                kind, size = "two pairs", 5
            elif cell == 8 and t >> 3 == 21:
                kind, size = "triple", 43
            elif cell == 8 and t >> 3 == 17:
                kind, size = "pair", 51
            else:
                raise AssertionError(f"token {t} at {pos}")
            kinds[kind] = kinds.get(kind, 0) + 1
            pos += size
    assert pos == len(stream)
    return kinds


def sample(kind, shape, rng, dtype=np.uint8):
    y, x = np.indices(shape)
    if kind == "random":
        return rng.integers(0, 256, shape, dtype=np.uint64).astype(dtype)
    if kind == "smooth":
        return (np.sin(y / 9.0) * np.cos(x / 13.0) * 100 + 100).astype(dtype)
    if kind == "steps":
        return ((y // 5) * 3 + x // 7).astype(dtype)
    if kind == "two values":
        return rng.integers(0, 2, shape).astype(dtype)
    if kind == "rows":  # rows repeat with a few flipped bits: row and cell matches
        base = rng.integers(0, 3, (shape[0], 1)) * np.ones((1, shape[1]), np.int64)
        return (base ^ (rng.random(shape) < 0.03)).astype(dtype)
    if kind == "columns":
        return sample("rows", shape[::-1], rng, dtype).T.copy()
    if kind == "tiles":
        tile = rng.integers(0, 256, (4, 8))
        reps = (shape[0] // 4 + 1, shape[1] // 8 + 1)
        return np.tile(tile, reps)[: shape[0], : shape[1]].astype(dtype)
    if kind == "sparse":
        return ((rng.random(shape) < 0.002) * rng.integers(1, 256, shape)).astype(dtype)
    if kind == "constant":
        return np.full(shape, 3, dtype)
    if kind == "zeros":
        return np.zeros(shape, dtype)
    raise ValueError(kind)


def encode(block, blockshape, cell, capacity=None):
    out = np.zeros(capacity if capacity is not None else block.size, np.uint8)
    n = _ndlz.compress(block.reshape(-1), out, blockshape, cell, 1, 5)
    return bytes(out[:n]) if n else None


def decode(stream, blockshape, cell):
    dst = np.zeros(blockshape[0] * blockshape[1], np.uint8)
    return _ndlz.decompress(stream, dst, blockshape, cell, 1), dst


# --- the hash --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, seed, expected",
    [
        (b"", 0, 0x02CC5D05),
        (b"a", 0, 0x550D7456),
        (b"abc", 0, 0x32D153FF),
        (b"Nobody inspects the spammish repetition", 0, 0xE2293B2F),
    ],
)
def test_xxh32_known_values(data, seed, expected):
    assert _ndlz.xxh32(data, seed) == expected


# --- round trips and give-ups (no oracle) ------------------------------------------------------


@pytest.mark.parametrize("cell", [4, 8])
@pytest.mark.parametrize("blockshape", BLOCKSHAPES + [(3, 100), (200, 9), (256, 256)])
@pytest.mark.parametrize(
    "kind", ["smooth", "steps", "two values", "rows", "tiles", "constant", "zeros"]
)
def test_round_trip(cell, blockshape, kind):
    block = sample(kind, blockshape, np.random.default_rng(7))
    stream = encode(block, blockshape, cell)
    if stream is None:
        return
    assert len(stream) < block.size
    cell_kinds(stream, cell)
    n, out = decode(stream, blockshape, cell)
    assert n == block.size
    assert np.array_equal(out, block.reshape(-1))


@pytest.mark.parametrize("cell", [4, 8])
def test_gives_up_where_c_blosc2_does(cell):
    rng = np.random.default_rng(1)
    # Incompressible: literal cells cost one byte more than they hold.
    assert encode(sample("random", (64, 64), rng), (64, 64), cell) is None
    # A stream shorter than one cell.
    assert encode(sample("zeros", (cell - 1, cell), rng), (cell - 1, cell), cell) is None
    # Capacity below 17 + 2 * (cells - 1) (a bound the per-cell room check implies anyway).
    block = sample("zeros", (64, 64), rng)
    assert encode(block, (64, 64), cell, capacity=17 + (block.size // cell**2 - 1) * 2 - 1) is None
    # Not enough room left for one more literal cell (cell * cell + 1 bytes).
    tiles = sample("steps", (64, 64), rng)
    full = encode(tiles, (64, 64), cell)
    assert full is not None
    assert encode(tiles, (64, 64), cell, capacity=len(full) + cell * cell) == full
    assert encode(tiles, (64, 64), cell, capacity=len(full) - 1) is None


def test_a_result_as_long_as_the_input_means_raw():
    """A 4x24 stream of one uniform and five random cells codes to 9 + 2 + 5 * 17 = 96 bytes,
    its own size: c-blosc2 then stores it raw (a csize equal to the stream size means raw),
    so compress says 0. With a second uniform cell it codes to 81 bytes."""
    rng = np.random.default_rng(3)
    block = rng.integers(0, 256, (4, 24)).astype(np.uint8)
    block[:, :4] = 1
    assert encode(block, (4, 24), 4) is None
    block[:, 4:8] = 2
    stream = encode(block, (4, 24), 4)
    assert len(stream) == 81 and cell_kinds(stream, 4) == {"uniform": 2, "literal": 4}


def test_parameters_are_checked_before_work():
    src = np.zeros(64, np.uint8)
    dst = np.zeros(64, np.uint8)
    with pytest.raises(ValueError, match="codec_meta"):
        _ndlz.compress(src, dst, (8, 8), 5, 1, 5)
    with pytest.raises(ValueError, match="codec_meta"):
        _ndlz.decompress(b"\x02" + bytes(8), dst, (8, 8), 16, 1)
    with pytest.raises(ValueError, match="ndim == 2"):
        _ndlz.compress(src, dst, (4, 4, 4), 4, 1, 5)
    with pytest.raises(ValueError, match="ndim == 2"):
        _ndlz.decompress(b"\x02" + bytes(8), dst, (64,), 4, 1)
    with pytest.raises(ValueError, match=">= 1"):
        _ndlz.compress(src, dst, (0, 64), 4, 1, 5)
    with pytest.raises(ValueError, match="split"):
        _ndlz.compress(src, dst, (4, 8), 4, 2, 5)  # 64 bytes for a 4x8 stream
    with pytest.raises(ValueError, match="dst must hold"):
        _ndlz.decompress(b"\x02" + bytes(8), dst, (4, 8), 4, 1)
    with pytest.raises(ValueError, match="at least 9"):
        _ndlz.compress(src, dst[:8], (8, 8), 4, 1, 5)
    with pytest.raises(ValueError, match="clevel"):
        _ndlz.compress(src, dst, (8, 8), 4, 1, 10)
    with pytest.raises(ValueError, match="typesize"):
        _ndlz.compress(src, dst, (8, 8), 4, 0, 5)


# --- hostile streams (no oracle) ---------------------------------------------------------------


def header(bs0, bs1, ndim=2):
    return struct.pack("<Bii", ndim, bs0, bs1)


@pytest.mark.parametrize("cell", [4, 8])
def test_bad_headers_are_refused(cell):
    dst = np.zeros(64, np.uint8)
    literal = b"\x00" + bytes(64)
    for stream in [
        b"",
        header(8, 8)[:8],
        header(8, 8, ndim=3) + literal,
        header(-8, -8) + literal,
        header(4, 16) + literal,  # same size, other shape
        header(16, 4)[:9],
        header(1 << 30, 1 << 30) + literal,
    ]:
        r = _ndlz.decompress(stream, dst, (8, 8), cell, 1)
        if stream.startswith(header(4, 16)) and cell == 4:
            continue  # c-blosc2 decodes by the stream's shape: checked below
        assert r == -1, stream[:9]
    # The shape in the stream wins, as in c-blosc2, when it covers exactly len(dst) bytes.
    r = _ndlz.decompress(header(4, 16) + b"\x40\x05" * 4, dst, (8, 8), 4, 1)
    assert r == 64 and (dst == 5).all()


@pytest.mark.parametrize(
    "cell, body",
    [
        (4, b"\xc0\x00\x00"),  # cell copy of the token itself: too short
        (4, b"\xc0\xff\xff"),  # cell copy from before the stream
        (4, b"\xe8\x00\x00" + bytes(4)),  # triple at base + 3 - 3: the token, 12 > 7 bytes
        (4, b"\xe8\xf0\xff" + bytes(4)),  # triple from 13 bytes before the stream start
        (4, b"\x88\x00\x01" + bytes(8)),  # pair from before the stream
        (4, b"\x88\xfe\xff" + bytes(7)),  # pair offset wrapping to 1: one byte short
        (4, b"\x28\xfb\xff\xfb\xff"),  # two pairs, offsets wrapping to 0
        (4, b"\x28\x00\x10\x00\x00"),  # two pairs from before the stream
        (4, b"\x01" + bytes(16)),  # no such token
        (4, b"\xc1" + bytes(16)),
        (4, b"\x40"),  # uniform cell without its byte
        (4, b"\x00" + bytes(15)),  # literal cut short
        (8, b"\xae\x00\x00" + bytes(40)),  # triple starting at row 6
        (8, b"\x8f\x00\x00" + bytes(48)),  # pair starting at row 7
        (8, b"\xa8\xff\xff" + bytes(40)),  # triple from before the stream
        (8, b"\x88\x00\x00" + bytes(47)),  # pair with a literal row cut short
        (8, b"\xe0" + bytes(64)),  # a 4x4 token in an 8x8 stream
        (8, b"\x00" + bytes(63)),
    ],
)
def test_hostile_references_are_refused(cell, body):
    blockshape = (cell, cell)
    assert decode(header(*blockshape) + body, blockshape, cell)[0] == -1


def test_trailing_bytes_are_ignored_like_c_blosc2():
    n, out = decode(header(4, 4) + b"\x40\x09" + b"junk", (4, 4), 4)
    assert n == 16 and (out == 9).all()


@pytest.mark.parametrize("cell", [4, 8])
def test_every_truncation_is_refused(cell):
    block = sample("rows", (40, 37), np.random.default_rng(11))
    stream = encode(block, (40, 37), cell)
    assert stream is not None
    for k in range(len(stream)):
        assert decode(stream[:k], (40, 37), cell)[0] == -1


@pytest.mark.parametrize("cell", [4, 8])
def test_mutated_streams_never_escape(cell):
    """Thousands of damaged streams: each decodes fully or returns -1."""
    rng = np.random.default_rng(cell)
    blockshape = (33, 46)
    streams = [
        encode(sample(kind, blockshape, rng), blockshape, cell)
        for kind in ("rows", "two values", "tiles", "steps")
    ]
    streams = [s for s in streams if s is not None]
    assert streams
    n = blockshape[0] * blockshape[1]
    outcomes = set()
    for trial in range(3000):
        s = bytearray(streams[trial % len(streams)])
        for _ in range(rng.integers(1, 4)):
            p = int(rng.integers(9, len(s)))
            s[p] = int(rng.choice([0, 0xFF, 64, 192, rng.integers(0, 256)]))
        if trial % 7 == 0:
            s = s[: rng.integers(9, len(s) + 1)]
        r, _ = decode(bytes(s), blockshape, cell)
        assert r in (-1, n)
        outcomes.add(r)
    assert outcomes == {-1, n}
    for _ in range(500):  # random bodies behind a valid header
        body = rng.integers(0, 256, int(rng.integers(0, 200)), dtype=np.uint8).tobytes()
        assert decode(header(*blockshape) + body, blockshape, cell)[0] in (-1, n)


# --- against python-blosc2 ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def blosc2():
    return pytest.importorskip("blosc2", reason="python-blosc2 is the NDLZ oracle")


def ndlz_array(blosc2, x, blocks, cell, shuffle=False, chunks=None):
    ts = x.dtype.itemsize
    cparams = dict(
        codec=blosc2.Codec.NDLZ,
        codec_meta=cell,
        clevel=5,
        nthreads=1,
        filters=[blosc2.Filter.SHUFFLE if shuffle else blosc2.Filter.NOFILTER],
        filters_meta=[0],
        # c-blosc2's NDLZ codes one byte per item: wider items need a stream per byte.
        splitmode=blosc2.SplitMode.ALWAYS_SPLIT if ts > 1 else blosc2.SplitMode.NEVER_SPLIT,
    )
    return blosc2.asarray(
        x, chunks=chunks or blocks, blocks=blocks, cparams=cparams, dparams=dict(nthreads=1)
    )


def chunk_streams(chunk):
    """(block, stream position, csize, payload) of every stream of a regular chunk."""
    flags, ts = chunk[2], chunk[3]
    nbytes, bsize, _ = struct.unpack_from("<iii", chunk, 4)
    assert flags & 0x05 == 0x05  # extended header
    if flags & 0x02 or (chunk[31] >> 4) & 7:
        return []  # memcpyed or special: the codec is not involved
    nstreams = 1 if flags & 0x10 else ts
    found = []
    for j in range(-(-nbytes // bsize)):
        (pos,) = struct.unpack_from("<i", chunk, 32 + 4 * j)
        for _ in range(nstreams):
            (cs,) = struct.unpack_from("<i", chunk, pos)
            found.append((j, pos, cs, bytes(chunk[pos + 4 : pos + 4 + max(cs, 0)])))
            pos += 4 + (cs if cs > 0 else 1 if cs < 0 else 0)
    return found


def compare_with_oracle(blosc2, x, blocks, cell, shuffle=False, chunks=None):
    """Check every codec stream of the array's chunks; return counts per outcome."""
    arr = ndlz_array(blosc2, x, blocks, cell, shuffle, chunks)
    ts = x.dtype.itemsize
    neblock = blocks[0] * blocks[1]
    counts = {"coded": 0, "raw": 0, "run": 0, "kinds": {}}
    for i in range(arr.schunk.nchunks):
        chunk = arr.schunk.get_chunk(i)
        nbytes, bsize = struct.unpack_from("<ii", chunk, 4)
        plain = np.frombuffer(arr.schunk.decompress_chunk(i), np.uint8)
        streams = chunk_streams(chunk)
        for k, (j, pos, cs, payload) in enumerate(streams):
            block = plain[j * bsize : (j + 1) * bsize]
            if shuffle and ts > 1:
                block = np.ascontiguousarray(block.reshape(-1, ts).T).reshape(-1)
            s = k % ts if ts > 1 else 0
            stream = np.ascontiguousarray(block[s * neblock : (s + 1) * neblock])
            if cs <= 0:
                counts["run"] += 1  # c-blosc2 codes runs itself, never calling NDLZ
                continue
            # c-blosc2's capacity: the stream size, less when the chunk (nbytes + 32) is short.
            capacity = min(neblock, nbytes + 32 - (pos + 4))
            out = np.zeros(neblock, np.uint8)
            r = _ndlz.compress(stream, out[:capacity], blocks, cell, ts, 5)
            if cs == neblock:
                counts["raw"] += 1
                assert r == 0, (i, k)
                continue
            counts["coded"] += 1
            assert bytes(out[:r]) == payload, (i, k, r, cs)
            n, dec = decode(payload, blocks, cell)
            assert n == neblock and np.array_equal(dec, stream), (i, k)
            for kind, c in cell_kinds(payload, cell).items():
                counts["kinds"][kind] = counts["kinds"].get(kind, 0) + c
    return counts


@pytest.mark.parametrize("cell", [4, 8])
@pytest.mark.parametrize("blocks", BLOCKSHAPES)
@pytest.mark.parametrize(
    "dtype, shuffle",
    [
        (np.uint8, False),
        (np.uint16, False),
        (np.uint16, True),
        (np.float32, True),
        (np.int32, False),
        (np.float64, True),
        (np.int64, False),
    ],
)
@pytest.mark.parametrize("kind", ["random", "smooth", "steps", "two values", "constant", "zeros"])
def test_streams_are_c_blosc2s(blosc2, cell, blocks, dtype, shuffle, kind):
    """A chunk of 2x3 blocks: the kind under test in the first row of blocks (in the first
    block only if they are small), the others almost uniform, so that the codec sees some
    streams whatever the kind (runs never reach it) and the chunk is not stored whole."""
    rng = np.random.default_rng(hash((cell, blocks, kind)) % 2**32)
    shape = (2 * blocks[0], 3 * blocks[1])
    x = np.zeros(shape, dtype)
    x[blocks[0] - 1 :: blocks[0], :: blocks[1]] = 1  # in cut cells if there are any
    x[blocks[0] - 1 :: blocks[0], blocks[1] - 1 :: blocks[1]] = 2
    width = blocks[1] * (3 if blocks[0] * blocks[1] >= 256 else 1)
    x[: blocks[0], :width] = sample(kind, (blocks[0], width), rng, dtype)
    if kind == "smooth" and np.dtype(dtype).kind == "f":
        x[: blocks[0], :width] /= 7
    try:
        counts = compare_with_oracle(blosc2, x, blocks, cell, shuffle, chunks=shape)
    except RuntimeError:
        # python-blosc2 fails this chunk itself: once raw streams fill the chunk's room, a
        # stream gets fewer than 9 bytes of output, which c-blosc2's NDLZ treats as an error
        # (compress raises ValueError there).
        assert (kind, dtype, blocks) == ("random", np.int64, (10, 7))
        return
    if counts["coded"] + counts["raw"] == 0:
        # 10x7 in 8x8 cells: every cell is cut, so written literally; nothing can be coded
        # and c-blosc2 stores the chunk whole.
        assert (cell, blocks, np.dtype(dtype).itemsize) == (8, (10, 7), 1)
        assert encode(np.ascontiguousarray(x[:10, :7]), blocks, cell) is None
        return
    if blocks[0] * blocks[1] >= 256:
        assert counts["coded"] >= 1


@pytest.mark.parametrize("cell", [4, 8])
def test_every_token_kind_is_c_blosc2s(blosc2, cell):
    rng = np.random.default_rng(5)
    kinds = {}
    for kind in ("rows", "columns", "two values", "tiles", "smooth", "sparse"):
        x = sample(kind, (512, 512), rng)
        counts = compare_with_oracle(blosc2, x, (256, 256), cell, chunks=(512, 512))
        assert counts["coded"] >= 1
        for k, c in counts["kinds"].items():
            kinds[k] = kinds.get(k, 0) + c
    expected = {"literal", "uniform", "cell", "pair", "triple"}
    if cell == 4:
        expected.add("two pairs")
    assert expected <= set(kinds), kinds


def test_far_row_matches_decode_as_c_blosc2_decodes(blosc2):
    """c-blosc2 adds 3 to a 4x4 row match's u16 offset in 16 bits: offsets of 65 533 and
    more wrap and point after the token. Its encoder writes such offsets; its decoder then
    returns other bytes than were coded. Both sides of that are reproduced."""
    wrapped = 0
    for kind in ("triple", "pair"):
        for fillers in range(6, 11):
            x = far_match_block(fillers, fillers, 3 if kind == "triple" else 2)
            arr = ndlz_array(blosc2, x, x.shape, 4)
            ((_, _, cs, payload),) = chunk_streams(arr.schunk.get_chunk(0))
            assert encode(x, x.shape, 4) == payload
            theirs = np.frombuffer(arr.schunk.decompress_chunk(0), np.uint8)
            n, ours = decode(payload, x.shape, 4)
            assert n == x.size and np.array_equal(ours, theirs)
            wrapped += not np.array_equal(theirs, x.reshape(-1))
    assert wrapped >= 1


@pytest.mark.parametrize("cell", [4, 8])
def test_damaged_streams_decode_as_c_blosc2_decodes(blosc2, cell):
    """Damaged streams in a real chunk: python-blosc2 and this decoder agree on each one,
    failing together or giving the same bytes."""
    rng = np.random.default_rng(100 + cell)
    blocks = (48, 40)
    x = np.concatenate([sample("rows", blocks, rng), sample("columns", blocks, rng)], axis=1)
    arr = ndlz_array(blosc2, x, blocks, cell, chunks=x.shape)
    chunk = bytes(arr.schunk.get_chunk(0))
    streams = chunk_streams(chunk)
    assert len(streams) == 2 and all(0 < cs < x.size // 2 for _, _, cs, _ in streams)
    _, pos, _, payload = streams[1]  # the last stream: it can change length
    neblock = blocks[0] * blocks[1]
    agreed = {"fail": 0, "same bytes": 0}
    for trial in range(1500):
        s = bytearray(payload)
        for _ in range(rng.integers(1, 4)):
            p = int(rng.integers(0, len(s)))
            s[p] = int(rng.choice([0, 0xFF, 64, 192, 40, 136, 168, 224, rng.integers(0, 256)]))
        if trial % 5 == 0:
            s = s[: rng.integers(1, len(s) + 1)]
        if len(s) >= neblock:
            continue
        damaged = bytearray(chunk[:pos]) + struct.pack("<i", len(s)) + s
        struct.pack_into("<i", damaged, 12, len(damaged))
        try:
            theirs = np.frombuffer(blosc2.decompress2(bytes(damaged)), np.uint8)[neblock:]
        except Exception:
            theirs = None
        n, ours = decode(bytes(s), blocks, cell)
        if theirs is None:
            assert n < 0, trial
            agreed["fail"] += 1
        else:
            assert n == neblock and np.array_equal(ours, theirs), trial
            agreed["same bytes"] += 1
    assert agreed["fail"] > 100 and agreed["same bytes"] > 100, agreed
