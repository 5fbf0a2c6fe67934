"""Deterministic change sequences for the kill tests, and the model of what each step leaves.

Step ``k`` of a sequence is a function of ``k`` and the state before it, so the parent can
replay the sequence on numpy and know what the frame must hold after any committed step. The
child (``python crash_steps.py PATH KIND CONTIGUOUS START``) performs steps START+1, START+2...
on the frame at PATH and prints each step's number once it is committed; the parent kills it
at a random moment and checks the frame.
"""

from __future__ import annotations

import sys

import numpy as np

N = 256  # items per SChunk chunk
SHAPE0, CHUNKS, BLOCKS = (40, 30), (10, 10), (5, 5)


# --- SChunk: append, insert, update, delete, vlmeta ----------------------------------------


def schunk_initial() -> tuple[list[int], dict]:
    return [0, 1, 2], {}


def schunk_step(k: int, values: list[int], vlmeta: dict) -> tuple[str, tuple]:
    """The change step ``k`` makes (and applies it to the model in place)."""
    n = len(values)
    op = k % 6
    if op == 1 and n:
        at = (k * 7) % (n + 1)
        values.insert(at, k)
        return "insert", (at, k)
    if op == 2 and n:
        at = (k * 3) % n
        values[at] = k
        return "update", (at, k)
    if op == 3 and n > 2:
        at = (k * 5) % n
        del values[at]
        return "delete", (at,)
    if op == 4:
        vlmeta["k"] = k
        vlmeta["pad"] = "x" * (k % 37)
        return "vlmeta", (k,)
    if op == 5 and n > 4:
        values[:] = values[:3]  # several chunks deleted in one step (reindex)
        return "truncate", (3,)
    values.append(k)
    return "append", (k,)


def schunk_apply(s, change: tuple[str, tuple]) -> None:
    import b2store

    def chunk(v):
        return b2store.encode_chunk(np.full(N, v, "<i4"), typesize=4)

    op, args = change
    if op == "insert":
        s.insert_chunk(args[0], chunk(args[1]))
    elif op == "update":
        s.update_chunk(args[0], chunk(args[1]))
    elif op == "delete":
        s.delete_chunk(args[0])
    elif op == "vlmeta":
        s.vlmeta.update({"k": args[0], "pad": "x" * (args[0] % 37)})
    elif op == "truncate":
        s.reindex(s.offsets[: args[0]], args[0] * N * 4)
    else:
        s.append_chunk(chunk(args[0]))


def schunk_read(s) -> tuple[list[int], dict]:
    values = []
    for i in range(s.nchunks):
        x = s.decompress_chunk(i).view("<i4")
        assert len(x) == N and (x == x[0]).all(), f"chunk {i} is not one value"
        values.append(int(x[0]))
    return values, dict(s.vlmeta)


# --- B2ndArray: writes across chunks, resize, vlmeta ----------------------------------------


def array_initial() -> tuple[np.ndarray, dict]:
    return np.zeros(SHAPE0, "<i4"), {}


def array_step(k: int, arr: np.ndarray, vlmeta: dict):
    op = k % 4
    if op == 1:
        rows = 20 + (k * 7) % 41  # 20..60
        cols = 20 + (k * 3) % 21  # 20..40
        new = np.zeros((rows, cols), "<i4")
        r, c = min(rows, arr.shape[0]), min(cols, arr.shape[1])
        new[:r, :c] = arr[:r, :c]
        return new, vlmeta, ("resize", (rows, cols))
    if op == 2:
        vlmeta = dict(vlmeta, k=k)
        return arr, vlmeta, ("vlmeta", (k,))
    r0, c0 = (k * 11) % arr.shape[0], (k * 13) % arr.shape[1]
    sel = (slice(r0, r0 + 12), slice(c0, c0 + 12))  # up to four chunks
    arr = arr.copy()
    arr[sel] = k
    return arr, vlmeta, ("set", (r0, c0, k))


def array_apply(a, change) -> None:
    op, args = change
    if op == "resize":
        a.resize(args)
    elif op == "vlmeta":
        a.vlmeta["k"] = args[0]
    else:
        r0, c0, k = args
        a[r0 : r0 + 12, c0 : c0 + 12] = k


# --- the Zarr store: one chunk per step, through zarr --------------------------------------


def zarr_step(k: int, arr: np.ndarray, vlmeta: dict):
    r, c = (k * 3) % 4 * 10, (k * 7) % 3 * 10
    arr = arr.copy()
    arr[r : r + 10, c : c + 10] = k
    return arr, vlmeta, ("set", (r, c, k))


def zarr_apply(z, change) -> None:
    r, c, k = change[1]
    z[r : r + 10, c : c + 10] = k


# --- to_b2nd: the whole tree replaced each step ---------------------------------------------


def dataset(k: int):
    import xarray as xr

    return xr.Dataset(
        {"t": (("y", "x"), np.full((6, 8), k, "<i4")), "u": (("y",), np.arange(6) * k)},
        attrs={"k": k},
    )


# --- the child --------------------------------------------------------------------------------


def replay(kind: str, upto: int):
    """The model after step ``upto`` (0: the initial state)."""
    if kind == "schunk":
        values, vlmeta = schunk_initial()
        for k in range(1, upto + 1):
            schunk_step(k, values, vlmeta)
        return values, vlmeta
    if kind in ("to_b2nd", "asarray", "asarray-sparse"):
        return upto
    step = zarr_step if kind == "zarr" else array_step
    arr, vlmeta = array_initial()
    for k in range(1, upto + 1):
        arr, vlmeta, _ = step(k, arr, vlmeta)
    return arr, vlmeta


def child(path: str, kind: str, start: int) -> None:
    import b2store

    if kind.startswith("asarray"):
        k = start
        while True:
            k += 1
            data = np.full((30, 20), k, "<i4")
            a = b2store.asarray(data, path, chunks=(10, 10), contiguous=kind == "asarray", mode="w")
            a.close()
            print(k, flush=True)
    if kind == "to_b2nd":
        k = start
        while True:
            k += 1
            b2store.to_b2nd(dataset(k), path, mode="w")
            print(k, flush=True)
    if kind == "zarr":
        import zarr

        z = zarr.open_array(b2store.B2ndStore(path, mode="a"), mode="a")
        arr, vlmeta = replay(kind, start)
        k = start
        while True:
            k += 1
            arr, vlmeta, change = zarr_step(k, arr, vlmeta)
            zarr_apply(z, change)
            print(k, flush=True)
    obj = b2store.open(path, mode="a")
    if kind == "schunk":
        values, vlmeta = replay(kind, start)
        k = start
        while True:
            k += 1
            schunk_apply(obj, schunk_step(k, values, vlmeta))
            print(k, flush=True)
    else:
        arr, vlmeta = replay(kind, start)
        k = start
        while True:
            k += 1
            arr, vlmeta, change = array_step(k, arr, vlmeta)
            array_apply(obj, change)
            print(k, flush=True)


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2], int(sys.argv[3]))
