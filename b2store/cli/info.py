"""The ``info`` command: what :func:`b2store.cli.inspection.describe` found, laid out for
people, like ``ncdump -h``."""

from __future__ import annotations

import json
from collections.abc import Mapping

from .inspection import describe, shown

__all__ = ["format_info", "run"]


# --- text ---------------------------------------------------------------------------------


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _ratio(r) -> str:
    return "-" if r is None else f"{r:.2f}x"


def _filters_text(filters: list[dict]) -> str:
    return ", ".join(f"{f['name']}({f['meta']})" if f["meta"] else f["name"] for f in filters) or (
        "none"
    )


def _stats_lines(stats: dict, indent: str) -> list[str]:
    special = ", ".join(f"{n} {k}" for k, n in sorted(stats["special"].items()))
    missing = stats.get("not_written", 0)
    nstored = stats["count"] - sum(stats["special"].values()) - missing
    lines = [
        f"{indent}chunks    {stats['count']}: {nstored} compressed"
        + (f", special: {special}" if special else "")
        + (f", {missing} not written (fill value)" if missing else "")
    ]
    if stats.get("cbytes"):
        c, r = stats["cbytes"], stats.get("ratio")
        line = (
            f"{indent}per chunk {_size(c['min'])} .. {_size(int(c['median']))} (median) .. "
            f"{_size(c['max'])}"
        )
        if r:
            line += f"; ratio {_ratio(r['min'])} .. {_ratio(r['median'])} .. {_ratio(r['max'])}"
        lines.append(line)
    if stats.get("chunk_format_versions"):
        versions = ", ".join(map(str, stats["chunk_format_versions"]))
        lines.append(f"{indent}chunk format version {versions}")
    return lines


def _attr_lines(title: str, attrs: Mapping, indent: str) -> list[str]:
    if not attrs:
        return []
    lines = [f"{indent}{title}"]
    lines += [f"{indent}  {k} = {shown(v)}" for k, v in attrs.items()]
    return lines


def _frame_lines(info: dict, indent: str) -> list[str]:
    lines = []
    if info.get("no_data"):
        lines.append(f"{indent}not served: {info['no_data']}")
    if "shape" in info:
        lines.append(
            f"{indent}shape     {tuple(info['shape'])}  dtype {info['dtype']}  "
            f"(b2nd metalayer version {info['b2nd_metalayer_version']})"
        )
        lines.append(f"{indent}chunks    {tuple(info['chunks'])}  blocks {tuple(info['blocks'])}")
    meta = f" (codec_meta {info['codec_meta']})" if info.get("codec_meta") else ""
    lines.append(
        f"{indent}codec     {info['codec']}{meta}  clevel {info['clevel']}  filters "
        f"{_filters_text(info['filters'])}  splitmode {info['splitmode']}"
    )
    lines.append(
        f"{indent}items     typesize {info['typesize']}, blocksize {info['blocksize']}, "
        f"chunksize {info['chunksize']}"
    )
    lines.append(
        f"{indent}size      {_size(info['nbytes'])} -> {_size(info['cbytes'])} "
        f"({_ratio(info['ratio'])})"
    )
    lines += _stats_lines(info["chunk_stats"], indent)
    metas = ", ".join(f"{k} ({n} bytes)" for k, n in info["metalayers"].items()) or "none"
    lines.append(f"{indent}metalayers {metas}")
    lines += _attr_lines("vlmeta", info["vlmeta"], indent)
    for rec in info.get("chunk_list", []):
        lines.append(_chunk_line(rec, indent))
    return lines


def _chunk_line(rec: dict, indent: str) -> str:
    where = f"offset {rec['offset']}" if rec.get("offset") is not None else "in index"
    if rec.get("offset") is None and "stored" not in rec:
        where = "stored"
    kind = f"special {rec['special']}" if rec["special"] else f"v{rec.get('version', '?')}"
    nbytes = rec.get("nbytes")
    ratio = f" ({_ratio(nbytes / rec['cbytes'])})" if nbytes and rec["cbytes"] else ""
    return f"{indent}  chunk {rec['chunk']}: {where}, {rec['cbytes']} bytes{ratio}, {kind}" + (
        f", {nbytes} bytes decoded" if nbytes is not None else ""
    )


def format_info(info: dict) -> str:
    """:func:`describe`'s mapping as text, in the manner of ``ncdump -h``."""
    path, kind = info["path"], info["kind"]
    if kind == "chunk":
        return "\n".join(
            [
                f"{path}: Blosc chunk, format version {info['chunk_format_version']} "
                f"(codec format {info['codec_format_version']})",
                f"  codec     {info['codec']}  filters {_filters_text(info['filters'])}",
                f"  items     typesize {info['typesize']}, {info['nblocks']} blocks of "
                f"{info['blocksize']} bytes" + (", split streams" if info["split"] else ""),
                f"  size      {_size(info['nbytes'])} -> {_size(info['cbytes'])} "
                f"({_ratio(info['ratio'])})",
                "  kind      "
                + (
                    f"special ({info['special']})"
                    if info["special"]
                    else "memcpyed"
                    if info["memcpyed"]
                    else "compressed"
                )
                + (", dictionary" if info["use_dict"] else "")
                + (", variable-length blocks" if info["vl_blocks"] else ""),
            ]
            + (
                [f"  trailing  {info['trailing_bytes']} bytes after the chunk"]
                if info["trailing_bytes"]
                else []
            )
        )
    if "frame_format_version" in info:
        head = (
            f"{path}: {info['type']} in a {kind} (frame format version "
            f"{info['frame_format_version']}, {info['nchunks']} chunks)"
        )
        return "\n".join([head, *_frame_lines(info, "  ")])
    if "groups" in info:
        lines = [f"{path}: {kind}, {len(info['arrays'])} arrays"]
        for group, attrs in info["groups"].items():
            if attrs:
                lines += _attr_lines(f"group {group} attributes", attrs, "  ")
        for name, arr in info["arrays"].items():
            lines.append(
                f"  array {name}: {arr['type']} in a {arr['kind']} "
                f"(frame format version {arr['frame_format_version']})"
            )
            lines += _frame_lines(arr, "    ")
        return "\n".join(lines)
    lines = [f"{path}: {kind}" + (f", {len(info['arrays'])} arrays" if "group" in kind else "")]
    lines += _attr_lines("attributes", info.get("attributes", {}), "  ")
    for name, arr in info["arrays"].items():
        lines.append(f"  array {name}: Zarr v{arr['zarr_format']}")
        lines.append(
            f"    shape     {tuple(arr['shape'])}  dtype {arr['dtype']}  "
            f"chunks {tuple(arr['chunks'])}"
        )
        for codec in arr["codecs"]:
            lines.append(f"    codec     {codec}")
        lines.append(
            f"    size      {_size(arr['nbytes'])} -> {_size(arr['cbytes'])} "
            f"({_ratio(arr['ratio'])})"
        )
        stats = dict(arr["chunk_stats"])
        lines += _stats_lines(stats, "    ")
        lines += _attr_lines("attributes", arr["attributes"], "    ")
        for rec in arr.get("chunk_list", []):
            lines.append(_chunk_line(rec, "    "))
    return "\n".join(lines)


def run(args) -> int:
    info = describe(args.path, chunks=args.chunks)
    print(json.dumps(info, indent=1) if args.json else format_info(info))
    return 0
