"""A static HTTP server on localhost that honours Range requests and counts what it serves,
for tests of remote (byte-range) reading. It only ever listens on 127.0.0.1."""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Served:
    """What the server sent: bytes of file content, and one entry per request."""

    bytes: int = 0
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)

    def reset(self) -> None:
        self.bytes = 0
        self.requests.clear()


def _handler(root: Path, served: Served):
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
            if path is None:
                self.send_error(404)
                return
            size = path.stat().st_size
            start, stop = 0, size
            match = re.fullmatch(r"bytes=(\d*)-(\d*)", rng or "")
            if match and (match[1] or match[2]):
                if match[1]:
                    start = int(match[1])
                    stop = min(size, int(match[2]) + 1) if match[2] else size
                else:  # a suffix: the last N bytes
                    start = max(0, size - int(match[2]))
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
            else:
                self.send_response(200)
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(stop - start))
            self.end_headers()
            if body:
                with open(path, "rb") as fh:
                    fh.seek(start)
                    data = fh.read(stop - start)
                served.bytes += len(data)
                self.wfile.write(data)

    return Handler


@contextlib.contextmanager
def serve_directory(root: os.PathLike):
    """Serve ``root`` on 127.0.0.1 at a free port; yields ``(base_url, Served)``."""
    served = Served()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), _handler(Path(root).resolve(), served)
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
