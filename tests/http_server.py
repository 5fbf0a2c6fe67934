"""A static HTTP server on localhost that honours Range requests and counts what it serves,
for tests of remote (byte-range) reading, and misbehaves on demand (:class:`Faults`): it
fails, or it answers but bends HTTP (:data:`MISBEHAVIOURS`). It only ever listens on
127.0.0.1."""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

#: What a request can meet: a server error, a missing object, a body cut short (the full
#: Content-Length announced, half of it sent, the connection closed), a connection closed
#: before any answer, a slow answer (``SLOW_SECONDS``), an answer without Content-Length,
#: or nothing wrong.
FAULTS = ("500", "503", "404", "truncate", "reset", "slow", "nolength", "ok")
SLOW_SECONDS = 0.3
#: Answers that bend HTTP rather than fail: a body that stops half way and hangs (the
#: connection open, nothing more sent, until the server stops), no Content-Length (the body
#: ends when the connection closes; ranges honoured), Range ignored (200 and the whole body,
#: whatever was asked), a range answered one byte later than asked (its Content-Range says
#: so). Joined by "+", a fault is all of them at once ("nolength+norange").
MISBEHAVIOURS = ("stall", "nolength", "norange", "shifted")


@dataclass
class Faults:
    """Faults for the next requests, in order (``plan``), then ``always`` for every one
    after (None: serve normally). ``met`` records each fault as a request meets it."""

    plan: list[str] = field(default_factory=list)
    always: str | None = None
    met: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def next(self) -> str:
        with self._lock:
            fault = self.plan.pop(0) if self.plan else (self.always or "ok")
            self.met.append(fault)
            return fault


@dataclass
class Served:
    """What the server sent: bytes of file content, and one entry per request."""

    bytes: int = 0
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)

    def reset(self) -> None:
        self.bytes = 0
        self.requests.clear()


def _handler(root: Path, served: Served, faults: Faults, stopping: threading.Event):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep test output clean
            pass

        def _target(self) -> Path | None:
            path = (root / self.path.lstrip("/").split("?")[0]).resolve()
            return path if path.is_file() and root in path.parents else None

        def do_HEAD(self):
            self._serve(body=False)

        def do_GET(self):
            self._serve(body=True)

        def _serve(self, body: bool) -> None:
            path = self._target()
            rng = self.headers.get("Range")
            served.requests.append((self.command, self.path, rng))
            fault = faults.next()
            bends = set(fault.split("+"))
            if fault in ("500", "503", "404"):
                self.send_error(int(fault))
                return
            if fault == "reset":
                self.close_connection = True
                return  # (no status line: the client sees the connection close)
            if fault == "slow":
                time.sleep(SLOW_SECONDS)
            if path is None:
                self.send_error(404)
                return
            size = path.stat().st_size
            start, stop = 0, size
            match = re.fullmatch(r"bytes=(\d*)-(\d*)", rng or "")
            if match and (match[1] or match[2]) and "norange" not in bends:
                if match[1]:
                    start = int(match[1])
                    stop = min(size, int(match[2]) + 1) if match[2] else size
                else:  # a suffix: the last N bytes
                    start = max(0, size - int(match[2]))
                if "shifted" in bends:
                    start, stop = min(start + 1, size - 1), min(stop + 1, size)
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
            else:
                self.send_response(200)
            if "norange" not in bends:
                self.send_header("Accept-Ranges", "bytes")
            if "nolength" in bends:
                self.close_connection = True  # (the end of the body is the connection's)
            else:
                self.send_header("Content-Length", str(stop - start))
            self.end_headers()
            if body:
                with open(path, "rb") as fh:
                    fh.seek(start)
                    data = fh.read(stop - start)
                if bends & {"truncate", "stall"}:
                    data = data[: len(data) // 2]
                    self.close_connection = True
                served.bytes += len(data)
                self.wfile.write(data)
                if "stall" in bends:
                    self.wfile.flush()
                    stopping.wait()  # (nothing more until the server stops)

    return Handler


#: Seconds a read of a test may take before it counts as hung (see :func:`guarded`).
GUARD = 30


def guarded(fn, *args):
    """``fn(*args)`` in a thread: its result, or the exception it raised; a failure of the
    test if it is still running after :data:`GUARD` seconds (a read that hangs fails its
    test, not the whole run)."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn(*args)
        except BaseException as exc:  # (handed to the test)
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD)
    assert not thread.is_alive(), f"{fn.__name__} still running after {GUARD} s: it hangs"
    if "error" in out:
        raise out["error"]
    return out["value"]


class _Server(http.server.ThreadingHTTPServer):
    # Room for the 16 requests a read overlaps (the default, 5, drops the others' SYNs: they
    # connect a second later, past a short read timeout's connect).
    request_queue_size = 64


#: How often the serving loop looks whether it should stop. ``shutdown()`` waits for that
#: look: at the default half second, each server a test started cost it 0.5 s to stop (20 s of
#: the 40 servers of one hypothesis test).
POLL_SECONDS = 0.01


@contextlib.contextmanager
def serve_directory(root: os.PathLike, faults: Faults | None = None):
    """Serve ``root`` on 127.0.0.1 at a free port; yields ``(base_url, Served)``. With
    ``faults``, requests meet them (see :class:`Faults`)."""
    served = Served()
    stopping = threading.Event()
    handler = _handler(Path(root).resolve(), served, faults or Faults(), stopping)
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(POLL_SECONDS,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        stopping.set()  # (a stalled answer ends)
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
