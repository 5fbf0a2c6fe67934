"""The fuzz targets: each takes hostile bytes and must end normally or raise a B2StoreError.

The quick runs in this folder and the long atheris runs (``fuzz/run.py``) share them. A target
reads what it is given as a user would (open, list, read metadata, read data); the bytes may
also describe several files (a sparse frame, a ``.b2d`` tree), split by :data:`SEP`.

What a target may allocate is bounded by :data:`FUZZ_LIMITS`, which every target passes to
what it opens (``b2store.open``, ``B2ndStore``, ``open_tree``): the decoded size of one chunk
(and so of the offsets index and an embedded value) is capped there, and arrays are read
whole only when small.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

import b2store
from b2store.chunk.decoder import chunk_info, decode_chunk
from b2store.containers import BatchArray, Container
from b2store.errors import B2StoreError
from b2store.frame.schunk import SChunk
from b2store.limits import Limits
from b2store.nd import read_chunks

# One chunk decodes to at most this here (the library's default is larger): each fuzz input
# then costs little memory and time, and the limit's own refusal is exercised often.
# A vlmeta value likewise decodes to at most 4 MiB and 2**16 objects (nested msgpack bombs).
FUZZ_LIMITS = Limits(max_chunk_nbytes=4 << 20, max_vlmeta_nbytes=4 << 20, max_vlmeta_items=1 << 16)
# Arrays at most this large are read whole; larger ones are read at a few points.
WHOLE_READ = 1 << 20
# Chunks read per frame: the first few and the last (a frame may name millions of chunks).
CHUNKS_READ = 6
SEP = b"\x00B2FILE\x00"

# Names a multi-file input may create: chunk files, the index, tree members. Anything else is
# dropped before it touches the disk (the fuzzer must never write outside its scratch folder;
# traversal through names the *reader* sees is tested in test_hostile.py).
_NAME = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,40}/){0,3}[A-Za-z0-9_][A-Za-z0-9_.-]{0,40}$")

_SCRATCH: Path | None = None


def scratch() -> Path:
    """A per-process scratch folder, in memory (tmpfs) where there is one."""
    global _SCRATCH
    if _SCRATCH is None:
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        _SCRATCH = Path(tempfile.mkdtemp(prefix="b2store-fuzz-", dir=base))
        atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
    return _SCRATCH


def pack_files(files: dict[str, bytes]) -> bytes:
    """Several files as one fuzz input: ``SEP name \\n data`` for each."""
    return b"".join(SEP + name.encode() + b"\n" + data for name, data in files.items())


def unpack_files(data: bytes) -> dict[str, bytes]:
    files = {}
    for part in data.split(SEP)[1:]:
        name, _, body = part.partition(b"\n")
        try:
            text = name.decode("ascii")
        except UnicodeDecodeError:
            continue
        if _NAME.match(text) and ".." not in text and len(files) < 64:
            files[text] = body
    return files


def write_files(root: Path, files: dict[str, bytes]) -> None:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for name, body in files.items():
        # os.path, not pathlib: pathlib interns every path part it parses, so a million
        # inputs' random member names would stay in the interpreter's intern table.
        path = os.path.join(root, name)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(body)
        except (NotADirectoryError, IsADirectoryError, FileExistsError):
            continue  # names that clash ("a" and "a/b"): the input cannot be laid out


# --- exercising what opened ---------------------------------------------------------------


def _indices(n: int) -> list[int]:
    return sorted({*range(min(n, CHUNKS_READ - 1)), n - 1} - {-1})


def exercise_schunk(s: SChunk) -> None:
    len(s), s.nbytes, s.cbytes, repr(s)
    dict(s.meta)
    dict(s.vlmeta)
    for i in _indices(s.nchunks):
        s.chunk_span(i)
        s.decompress_chunk(i)
        s.get_chunk_blocks(i, [0])


def exercise_array(a) -> None:
    a.shape, a.dtype, a.chunks, a.blocks, repr(a), a.info
    dict(a.vlmeta)
    if a.size == 0:
        a[...]
        return
    if a.nbytes <= WHOLE_READ:
        a[...]
        # Again with every chunk taken as large: read in one compiled call per thread,
        # straight into the output (nd/read_chunks.box_way), where the layout allows.
        large, read_chunks.MAX_CHUNK_BYTES = read_chunks.MAX_CHUNK_BYTES, 0
        try:
            a[...]
        finally:
            read_chunks.MAX_CHUNK_BYTES = large
    else:
        a[(0,) * a.ndim]
        a[tuple(n - 1 for n in a.shape)]
        a[tuple(slice(0, 3) for _ in a.shape)]
    # A small box across the first chunks' corner: a few blocks of each (the part path).
    a[tuple(slice(max(0, c - 2), min(n, c + 2)) for n, c in zip(a.shape, a.chunks))]
    exercise_schunk(a.schunk)


def exercise_container(c: Container) -> None:
    """A python-blosc2 BatchArray, ListArray or ObjectArray: its first and last items."""
    repr(c)
    for i in _indices(len(c)):
        c[i]
    if isinstance(c, BatchArray):
        c.items[-1:] if c.batch_lengths() else None
    exercise_schunk(c.schunk)


def exercise(obj) -> None:
    try:
        if isinstance(obj, SChunk):
            exercise_schunk(obj)
        elif isinstance(obj, Container):
            exercise_container(obj)
        else:
            exercise_array(obj)
    finally:
        obj.close()


# --- the targets ----------------------------------------------------------------------------


def target_chunk(data: bytes) -> None:
    """``chunk_info`` and ``decode_chunk`` of one chunk."""
    chunk_info(data)
    decode_chunk(data, max_nbytes=FUZZ_LIMITS.max_chunk_nbytes)


def target_cframe(data: bytes) -> None:
    """A contiguous frame from its bytes, then from a file of them (a box of a local file's
    chunks is read from the file in C): opened, metadata and chunks read."""
    path = scratch() / "c.b2nd"
    path.write_bytes(data)
    try:
        exercise(b2store.open(data, limits=FUZZ_LIMITS))
    finally:
        exercise(b2store.open(path, limits=FUZZ_LIMITS))


def target_sframe(data: bytes) -> None:
    """A sparse frame: ``chunks.b2frame`` and chunk files, each of them mutated."""
    root = scratch() / "s.b2nd"
    write_files(root, unpack_files(data))
    exercise(b2store.open(root, limits=FUZZ_LIMITS))


def target_meta(data: bytes) -> None:
    """The b2nd (first byte even) or legacy caterva (odd) metalayer's content."""
    from b2store.nd.meta import B2ndMeta

    if data:
        B2ndMeta.from_bytes(data[1:], caterva=bool(data[0] & 1))


def target_vlmeta(data: bytes) -> None:
    """A trailer (vlmeta index) and a vlmeta value, as python-blosc2 encodes them."""
    from b2store.frame.trailer import read_trailer
    from b2store.frame.vlmeta_codec import unpack_value

    unpack_value(data, FUZZ_LIMITS)
    read_trailer(memoryview(data))


def target_codec(data: bytes) -> None:
    """The numcodecs codecs' ``decode`` (``blosc2`` and ``b2nd``)."""
    from b2store.integrations.numcodecs.codec import Blosc2

    codec = Blosc2()
    codec.max_buffer_size = FUZZ_LIMITS.max_chunk_nbytes  # the decoded size it accepts
    codec.decode(data)


def target_plugins(data: bytes) -> None:
    """A chunk of c-blosc2's plugins (ZFP, NDLZ, NDCELL, NDMEAN), which work on b2nd blocks:
    byte 0 picks the block's ndim (1 to 4), the next ndim bytes its extents (1 to 256), and
    the rest is the chunk, decoded with that block shape."""
    if not data:
        return
    ndim = data[0] % 4 + 1
    if len(data) < 1 + ndim:
        return
    blockshape = tuple(b + 1 for b in data[1 : 1 + ndim])
    decode_chunk(data[1 + ndim :], max_nbytes=FUZZ_LIMITS.max_chunk_nbytes, blockshape=blockshape)


_LOOP = None


def _loop():
    global _LOOP
    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()
    return _LOOP


def target_zarrstore(data: bytes) -> None:
    """B2ndStore over a mutated frame: keys listed, ``zarr.json`` and chunks read."""
    from zarr.core.buffer import default_buffer_prototype

    from b2store.integrations.zarr.store import B2ndStore

    path = scratch() / "z.b2nd"
    path.write_bytes(data)
    store = B2ndStore(path, limits=FUZZ_LIMITS)

    async def run():
        proto = default_buffer_prototype()
        keys = []
        async for key in store.list():
            keys.append(key)
            if len(keys) > 64:
                break
        for key in keys[:CHUNKS_READ] + keys[-2:]:
            await store.get(key, proto)
            await store.getsize(key)
        await store.get("zarr.json", proto)

    try:
        _loop().run_until_complete(run())
    finally:
        store.close()


def target_zarrread(data: bytes) -> None:
    """A mutated frame read through zarr over a B2ndStore: its metadata and a few chunks
    decoded by the ``b2nd`` codec, whole and in part (corrupt content: B2StoreError, as
    b2store.open says, never zarr's or NumPy's own errors)."""
    import zarr

    from b2store.integrations.zarr.store import B2ndStore

    path = scratch() / "r.b2nd"
    path.write_bytes(data)
    store = B2ndStore(path, limits=FUZZ_LIMITS)
    try:
        z = zarr.open_array(store, mode="r")
        if z.nbytes <= WHOLE_READ:
            z[...]
        elif z.ndim:
            z[(0,) * z.ndim]
            z[tuple(n - 1 for n in z.shape)]
    finally:
        store.close()


_PIPELINE = "b2store.integrations.zarr.pipeline.B2storeCodecPipeline"


def target_pipeline(data: bytes) -> None:
    """A chunk read through zarr with b2store's codec pipeline on: two chunk files holding
    ``data``, of an array whose chunk is what the header says when it says something usable
    (its item size and nbytes), read whole (decoded straight into zarr's output) and across
    both (through a buffer), by the pipeline's own file reads (a local store, zarr's
    ``BloscCodec``) or through a store's byte getters (in memory, b2store's ``blosc2``);
    then written in part, which reads and decodes the stored chunk first (the pipeline's
    writes)."""
    import zarr
    from zarr.codecs import BloscCodec

    from b2store.integrations.zarr.codecs import Blosc2Codec

    nitems, dtype = 256, np.dtype("u1")
    try:
        info = chunk_info(data)
    except B2StoreError:
        info = None
    if info is not None and 0 < info.nbytes <= WHOLE_READ:
        size = info.typesize if info.typesize in (1, 2, 4, 8) else 1
        if info.nbytes % size == 0:
            nitems, dtype = info.nbytes // size, np.dtype(f"<u{size}")
    local = len(data) % 2 == 0
    if local:
        root = scratch() / "pipeline.zarr"
        shutil.rmtree(root, ignore_errors=True)
        store, codec = zarr.storage.LocalStore(root), BloscCodec(typesize=dtype.itemsize)
    else:
        store, codec = zarr.storage.MemoryStore(), Blosc2Codec()
    with zarr.config.set({"codec_pipeline.path": _PIPELINE}):
        z = zarr.create_array(
            store, shape=(2 * nitems,), chunks=(nitems,), dtype=dtype, compressors=[codec],
            fill_value=0,
        )  # fmt: skip
        for key in ("c/0", "c/1"):
            if local:
                (root / "c").mkdir(exist_ok=True)
                (root / key).write_bytes(data)
            else:
                store._store_dict[key] = zarr.core.buffer.cpu.Buffer.from_bytes(data)
        z = zarr.open_array(store, mode="r")
        z[:]
        z[nitems // 2 : nitems + nitems // 2 + 1]
        zarr.open_array(store, mode="r+")[nitems // 2 : nitems // 2 + 1] = 1


def _exercise_tree(path: Path) -> None:
    from b2store.tree import open_tree

    tree = open_tree(path, limits=FUZZ_LIMITS)
    tree.groups()
    for n, ref in enumerate(tree.arrays().values()):
        if n >= 4:
            break
        _ = ref.shape, ref.dtype
        exercise(ref.open())


def target_b2z(data: bytes) -> None:
    """A ``.b2z`` tree (a zip of frames) from its bytes."""
    path = scratch() / "t.b2z"
    path.write_bytes(data)
    _exercise_tree(path)


def target_b2d(data: bytes) -> None:
    """A ``.b2d`` tree (a directory of frames, ``embed.b2e``) from its files."""
    root = scratch() / "t.b2d"
    write_files(root, unpack_files(data))
    _exercise_tree(root)


TARGETS = {
    "chunk": target_chunk,
    "cframe": target_cframe,
    "sframe": target_sframe,
    "meta": target_meta,
    "vlmeta": target_vlmeta,
    "codec": target_codec,
    "plugins": target_plugins,
    "zarrstore": target_zarrstore,
    "zarrread": target_zarrread,
    "pipeline": target_pipeline,
    "b2z": target_b2z,
    "b2d": target_b2d,
}


def run_one(name: str, data: bytes) -> None:
    """Run target ``name`` on ``data``: B2StoreError is a refusal; anything else escapes."""
    with warnings.catch_warnings():
        # Hostile metadata draws warnings (attributes left out, unstable Zarr dtypes): they
        # are expected here, and costly to format a million times.
        warnings.simplefilter("ignore")
        try:
            TARGETS[name](data)
        except B2StoreError:
            pass


# --- seeds ------------------------------------------------------------------------------------


def _files_under(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.stat().st_size < (8 << 20)
    }


def seeds(name: str, corpus: Path) -> list[bytes]:
    """Seed inputs for target ``name`` from the reference corpus (and a few made here)."""
    files = [p for p in sorted(corpus.rglob("*")) if p.is_file() and p.stat().st_size < (4 << 20)]
    frames = [p for p in files if p.suffix in (".b2nd", ".b2frame", ".caterva")]
    sparse = [
        p for p in sorted(corpus.rglob("*")) if p.is_dir() and (p / "chunks.b2frame").exists()
    ]
    out: list[bytes] = []
    if name in ("chunk", "codec", "pipeline"):
        out = [p.read_bytes() for p in files if p.suffix in (".bin", ".cdata")]
        out += _each(frames[:12], lambda s: [s.get_chunk(i) for i in _indices(s.nchunks)[:2]])
    elif name in ("cframe", "zarrstore", "zarrread"):
        out = [p.read_bytes() for p in frames]
    elif name == "sframe":
        out = [pack_files(_files_under(d)) for d in sparse]
        out += _each(frames[:8], lambda s: [pack_files(_sparse_copy(s))])
    elif name == "meta":
        out = _each(
            frames,
            lambda s: [
                tag + s.meta.raw(key)
                for key, tag in (("b2nd", b"\x00"), ("caterva", b"\x01"))
                if key in s.meta
            ],
        )
    elif name == "vlmeta":
        out = _each(frames, _trailer) + msgpack_bomb_seeds()
    elif name in ("b2z", "b2d"):
        out = _tree_seeds(name)
    elif name == "plugins":
        out = _plugin_seeds()
    if name == "cframe":
        out += [frame for frame, _ in _plugin_frames()] + container_seeds()
    return [s for s in out if s]


def container_seeds() -> list[bytes]:
    """python-blosc2 4.14's containers of variable-length items (chunk format version 6,
    frame format version 3), one frame of each kind, when python-blosc2 is there to write
    them (a test dependency; b2store writes none)."""
    try:
        import blosc2
    except ImportError:
        return []
    batches = blosc2.BatchArray(items_per_block=2)
    batches.extend([[b"bytes\x00", "text", 42], [{"nested": [1, 2]}, None, (1, 2.5)]])
    objects = blosc2.ObjectArray()
    objects.extend([{"a": 1}, [1, "two"], np.arange(3), {1, 2}, 1 + 2j])
    lists = blosc2.ListArray(item_spec=blosc2.int64(), nullable=True, batch_rows=2)
    lists.extend([[1, 2], None, [], [3]])
    lists.flush()
    return [batches.to_cframe(), objects.to_cframe(), lists.to_cframe()]


def _plugin_frames() -> list[tuple[bytes, tuple[int, ...]]]:
    """Small b2nd frames written with each plugin b2store writes (ZFP only with zfpy), and
    their block shapes."""
    import importlib.util

    field = np.add.outer(np.sin(np.arange(24) / 3), np.cos(np.arange(20) / 4))
    cases = [
        (field.astype("u1") + 7, (16, 12), {"codec": "ndlz", "codec_meta": 4}),
        (field.astype("u1") + 7, (16, 16), {"codec": "ndlz", "codec_meta": 8}),
        (field, (8, 6), {"codec": "lz4", "filters": ["ndcell"], "filters_meta": [4]}),
        (field.astype("f4"), (8, 8), {"codec": "zstd", "filters": ["ndmean"], "filters_meta": [4]}),
    ]
    if importlib.util.find_spec("zfpy") is not None:
        cases += [
            (field, (8, 8), {"codec": "zfp_acc", "codec_meta": 253}),
            (field.astype("f4"), (8, 4), {"codec": "zfp_prec", "codec_meta": 12}),
            (field, (4, 8), {"codec": "zfp_rate", "codec_meta": 30}),
        ]
    out = []
    for data, blocks, kw in cases:
        with b2store.asarray(data, chunks=(16, 16), blocks=blocks, **kw) as arr:
            out.append((arr.schunk.to_cframe(), blocks))
    return out


def _plugin_seeds() -> list[bytes]:
    out = []
    frames = _plugin_frames()
    # The JPEG 2000 plugins' arrays (python-blosc2 4.1.2 wrote them; tests/fixture/jpeg2000).
    for path in sorted((Path(__file__).parents[1] / "fixture" / "jpeg2000").glob("*.b2nd")):
        with b2store.open(path) as arr:
            frames.append((arr.schunk.to_cframe(), tuple(arr.blocks)[-4:]))
    for frame, blocks in frames:
        head = bytes([len(blocks) - 1, *(min(b, 256) - 1 for b in blocks)])
        with b2store.open(frame) as arr:
            out += [head + arr.schunk.get_chunk(i) for i in range(arr.schunk.nchunks)]
    return out


def msgpack_bomb_seeds() -> list[bytes]:
    """Nested msgpack whose few bytes ask for many objects or nested copies: lists wide and
    deep, empty maps, sets in sets, arrays in arrays (the mutator varies their counts)."""
    import msgpack

    seeds = []
    for width, count in ((1, 70_000), (100, 700), (15, 5000)):
        seeds.append(b"\xdd" + count.to_bytes(4, "big") + msgpack.packb([None] * width) * count)
    tree = b"\xc0"
    for _ in range(17):
        tree = b"\x92" + tree + tree
    seeds += [tree, b"\xdd\x00\x01\x20\x00" + b"\x80" * 0x12000]
    nested = msgpack.packb([bytes(200_000)])
    for _ in range(24):
        nested = msgpack.packb([msgpack.ExtType(45, nested)])
    seeds.append(nested)
    array = msgpack.packb({"dtype": {"str": "|u1"}, "shape": [200_000], "data": bytes(200_000)})
    for _ in range(24):
        array = msgpack.packb({"values": [msgpack.ExtType(46, array)], "shape": [1]})
    seeds.append(msgpack.packb(msgpack.ExtType(46, array)))
    return seeds


def _each(paths, fn) -> list[bytes]:
    """``fn(schunk)`` (a list of seeds) for each frame at ``paths`` that opens and reads (the
    corpus holds some that must not)."""
    out = []
    for p in paths:
        try:
            with SChunk.open(p.read_bytes()) as s:
                out += fn(s)
        except B2StoreError:
            continue
    return out


def _trailer(s: SChunk) -> list[bytes]:
    from b2store.frame.trailer import TRAILER_TAIL_LEN, trailer_span

    b = s._backend
    tail = b.read(b.frame_len - TRAILER_TAIL_LEN, TRAILER_TAIL_LEN)
    start, length = trailer_span(tail, b.frame_len, s.header.header_len)
    return [*s._raw_vlmeta.values(), b.read(start, length)]


def _sparse_copy(s: SChunk) -> dict[str, bytes]:
    d = scratch() / "seed-copy.b2nd"
    if d.exists():
        shutil.rmtree(d)
    out = SChunk.create(d, contiguous=False, meta=s.header.metalayers, typesize=s.typesize)
    out.extend_chunks(s.get_chunk(i) for i in range(s.nchunks))
    if s.vlmeta:
        out.vlmeta.update(dict(s.vlmeta))
    out.close()
    files = _files_under(d)
    files.pop(".b2store-lock", None)
    return files


def tree_shape_seeds() -> list[bytes]:
    """Zips of hostile shapes (the mutator varies their counts and names): member names
    nested past ``max_tree_depth`` and just within it, many members, a very long name."""
    import io
    import zipfile

    frame = b2store.asarray(np.arange(4, dtype="i4")).schunk.to_cframe()
    depth = Limits().max_tree_depth
    shapes = [
        ["a/" * 2000 + "x.b2nd"],
        ["a/" * depth + "x.b2nd", "top.b2nd"],
        [f"g{i % 9}/a{i}.b2nd" for i in range(300)],
        ["n" * 30_000 + ".b2nd"],
    ]
    out = []
    for names in shapes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
            for name in names:
                z.writestr(name, frame)
        out.append(buf.getvalue())
    return out


def _tree_seeds(kind: str) -> list[bytes]:
    """Small trees written by python-blosc2 (where it is installed) and by b2store. A tree
    that fails to be written fails the run: its seeds would otherwise be missing unseen."""
    import xarray as xr

    base = scratch() / "seed-trees"
    if base.exists():
        shutil.rmtree(base)
    base.mkdir()
    out = []
    try:
        import blosc2
    except ImportError:
        # The atheris runs (fuzz/run.py) may run where python-blosc2, a test dependency
        # only, is not installed: b2store's trees are their seeds then.
        blosc2 = None
    if blosc2 is not None:
        path = str(base / f"t.{kind}")
        with blosc2.DictStore(path, mode="w") as ds:
            ds["/a"] = blosc2.asarray(np.arange(50, dtype="i4").reshape(5, 10))
            ds["/grp/b"] = np.linspace(0, 1, 30)
            big = blosc2.asarray(np.arange(3000, dtype="f8"), chunks=(1000,), blocks=(250,))
            ds["/grp/c"] = big
        if kind == "b2z":
            out.append(Path(path).read_bytes())
        else:
            out.append(pack_files(_files_under(Path(path))))
    if kind == "b2z":
        out += tree_shape_seeds()
    xr_path = base / f"x.{kind}"
    ds = xr.Dataset(
        {"t": (("y", "x"), np.arange(12.0).reshape(3, 4))},
        coords={"y": [1, 2, 3]},
        attrs={"title": "seed"},
    )
    b2store.to_b2nd(ds, xr_path)
    if xr_path.is_file():
        out.append(xr_path.read_bytes())
    else:
        out.append(pack_files(_files_under(xr_path)))
    return out
