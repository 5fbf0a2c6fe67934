"""A real S3 API on localhost for the object-storage tests: moto's server, in a thread of the
test process, behind a counter of the requests it answers (method, key, range, the
conditional headers, bytes sent), an optional delay per request, as an object store far
away would answer, and stalls on demand (a GET whose answer never starts, or whose body
stops half way).

The tests start and stop it themselves: one server for a test process's whole run (the
``s3`` fixture in conftest.py; one per xdist worker), each test in a bucket of its own, its
delay, stalls and counts put back after it. Nothing outside the test process is needed beyond
the ``moto[server]`` and ``s3fs`` packages of the test extra.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass

# Credentials moto accepts: any, as long as some are given (none are looked up on the machine).
KEY, SECRET, REGION = "b2store-test", "b2store-test", "us-east-1"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    range: str | None
    status: int
    sent: int  # body bytes in the answer
    if_match: str | None = None  # the conditional headers the request carried
    if_none_match: str | None = None


_LOADERS: dict = {}


def share_botocore_data() -> None:
    """One botocore data loader per search path in this process, shared by every session.

    s3fs makes a botocore session for each filesystem, and the tests ask for a fresh filesystem
    each time (``skip_instance_cache``, so that no test is answered from another's cache): each
    session parsed S3's service model and endpoint rules again, 0.15 s a client (11 s of the 16
    of a zarr write into a bucket, 70 clients). The files parsed are the same; only the parsing
    is saved. b2store itself is untouched: this is the tests' process, not a user's."""
    import botocore.loaders
    import botocore.session

    if getattr(botocore.session.create_loader, "shared", False):
        return
    create = botocore.loaders.create_loader

    def shared(search_path_string=None):
        if search_path_string not in _LOADERS:
            _LOADERS[search_path_string] = create(search_path_string)
        return _LOADERS[search_path_string]

    shared.shared = True
    botocore.session.create_loader = shared  # (what botocore's sessions call)


class S3Server:
    """moto's S3 on ``127.0.0.1`` (a free port), counting what it answers."""

    def __init__(self):
        share_botocore_data()
        from moto.moto_server import werkzeug_app
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import WSGIRequestHandler, make_server

        # (moto's own handler, where it has one: newer releases answer S3's ``Expect`` with it)
        handler = getattr(werkzeug_app, "MotoRequestHandler", WSGIRequestHandler)

        class Quiet(handler):
            def log_request(self, *args, **kwargs):  # (one line per request otherwise)
                pass

        self.delay = 0.0  # seconds each request waits before it is answered
        # Requests (``stall_methods``) of keys holding ``stall_key`` stall: "headers" (no
        # answer at all) or "body" (half the body, then nothing), until ``release()`` or
        # ``stop()``.
        self.stall: str | None = None
        self.stall_key = ""
        self.stall_methods = ("GET",)
        self.stalled = 0  # requests that stalled
        self._released = threading.Event()
        self.requests: list[Request] = []
        self.in_flight = self.most_in_flight = 0
        self._lock = threading.Lock()
        app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", 0, self._counting(app), True,
                                   request_handler=Quiet)  # fmt: skip
        # (serve_forever looks for shutdown() this often: at its default, 0.5 s, stopping
        # took that long)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,),
                                        daemon=True)  # fmt: skip
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host}:{port}"

    def _counting(self, app):
        def wrapped(environ, start_response):
            with self._lock:
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                if self.delay:
                    time.sleep(self.delay)
                released = self._stalls(environ)
                if released is not None:
                    return self._stalled(answer(environ, start_response), released)
                return answer(environ, start_response)
            finally:
                with self._lock:
                    self.in_flight -= 1

        def answer(environ, start_response):
            status = []

            def starting(code, headers, *args):
                status.append(int(code.split()[0]))
                return start_response(code, headers, *args)

            body = list(app(environ, starting))
            path = environ.get("PATH_INFO", "")
            if environ.get("QUERY_STRING"):
                path += "?" + environ["QUERY_STRING"]
            conditions = environ.get("HTTP_IF_MATCH"), environ.get("HTTP_IF_NONE_MATCH")
            request = Request(environ["REQUEST_METHOD"], path, environ.get("HTTP_RANGE"),
                              status[0] if status else 0, sum(len(b) for b in body),
                              *conditions)  # fmt: skip
            with self._lock:
                self.requests.append(request)
            return body

        return wrapped

    def _stalls(self, environ) -> threading.Event | None:
        """The event that ends this request's stall, or None when it does not stall."""
        stall, released = self.stall, self._released
        if not stall or environ["REQUEST_METHOD"] not in self.stall_methods:
            return None
        if self.stall_key not in environ.get("PATH_INFO", ""):
            return None
        with self._lock:
            self.stalled += 1
        if stall == "headers":
            released.wait()  # (werkzeug sends nothing before the app returns)
        return released

    @staticmethod
    def _stalled(body, released: threading.Event):
        body = b"".join(body)
        yield body[: len(body) // 2]
        released.wait()
        yield body[len(body) // 2 :]

    def release(self) -> None:
        """End the stalls under way, and stall no more."""
        self.stall, self.stall_methods = None, ("GET",)
        self._released.set()
        self._released = threading.Event()

    @property
    def storage_options(self) -> dict:
        """fsspec's (s3fs's) options for this server, fresh connections each time."""
        return {
            "key": KEY,
            "secret": SECRET,
            "client_kwargs": {"endpoint_url": self.endpoint, "region_name": REGION},
            # (a listing cached by one test must not answer for the next)
            "use_listings_cache": False,
            "skip_instance_cache": True,
        }

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=KEY,
                            aws_secret_access_key=SECRET, region_name=REGION)  # fmt: skip

    def new_bucket(self) -> str:
        name = "b2store-" + uuid.uuid4().hex[:12]
        self.client().create_bucket(Bucket=name)
        return name

    def put(self, bucket: str, key: str, data: bytes) -> str:
        self.client().put_object(Bucket=bucket, Key=key, Body=data)
        return f"s3://{bucket}/{key}"

    def reset(self) -> None:
        """Forget the requests counted so far."""
        with self._lock:
            self.requests.clear()
            self.most_in_flight = self.in_flight
            self.stalled = 0

    def tidy(self) -> None:
        """As started, for the next test: no delay, no stall, nothing counted (a test that
        failed half way left them set for the tests after it, on a server they share)."""
        self.delay = 0.0
        self.stall_key = ""
        self.release()
        self.reset()

    def counted(self, method: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if method is None or r.method == method]

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._thread.join()
