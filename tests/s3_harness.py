"""An S3 API server on loopback that counts the requests it answers: moto's server mode (a real S3
API over HTTP) behind a WSGI middleware that records each request's method, path and query. The
object-store tests and ``benchmarks/object_store.py`` share it.

The server runs in this process, or with ``own_process=True`` in a process of its own (this file run
as a script): its own moto state (a second store whose buckets the first does not have), and its
requests answered on other cores than the client's, as a real store's are; its log is then read over
HTTP (``/__requests__``).

>>> with s3_server() as server:
...     with server.log.measure() as requests:
...         ...  # anything that reaches server.endpoint
...     requests.summary()  # {('PUT', '/lake/t/writes/*.json'): 1, ...}
"""

from __future__ import annotations

import json
import logging
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

BUCKET = "lake"
KEY_ID, SECRET = "arctic-test-key", "arctic-test-secret-value"

# Run-specific parts of a key (uuids, snapshot ids, version numbers) become '*', so the requests of
# one kind of file group together: '/lake/wh/db/t/change/metadata/*-*.metadata.json'.
_VARYING = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{16,}|\d+")
# Query parameters that name what a request does (a listing, a multipart upload), not their values.
_ACTIONS = ("list-type", "uploads", "uploadId", "delete", "prefix", "delimiter")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: str
    # When the server received it (its clock, seconds) and how long moto took to answer it: where a
    # slow commit's time went, request by request (``Requests.timeline``).
    started: float = 0.0
    seconds: float = 0.0

    @property
    def pattern(self) -> str:
        """The request with its run-specific parts starred: what the summary groups by."""
        path = _VARYING.sub("*", self.path)
        actions = sorted({part.split("=", 1)[0] for part in self.query.split("&")} & set(_ACTIONS))
        return f"{path}?{'&'.join(actions)}" if actions else path


@dataclass
class Requests:
    """The requests of one measured span, in the order the server received them."""

    requests: list[Request] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.requests)

    def count(self, method: str, contains: str = "") -> int:
        return sum(1 for r in self.requests if r.method == method and contains in r.path)

    def summary(self) -> dict[tuple[str, str], int]:
        """How many requests of each (method, pattern), most frequent first."""
        return dict(Counter((r.method, r.pattern) for r in self.requests).most_common())

    def timeline(self) -> str:
        """Every request in order, with when it came (from the first) and how long moto took."""
        first = self.requests[0].started if self.requests else 0.0
        return "\n".join(
            f"{(r.started - first) * 1000:8.1f} ms {r.seconds * 1000:6.1f} ms {r.method:6s} {r.path}"
            + (f"?{r.query}" if r.query else "")
            for r in sorted(self.requests, key=lambda r: r.started)
        )

    def table(self) -> str:
        """The summary as lines to print: where the requests of a failed bound went."""
        return "\n".join(f"{n:4d} {method:6s} {pattern}" for (method, pattern), n in self.summary().items())


class RequestLog:
    """Every request the server answered since it started."""

    def __init__(self) -> None:
        self._requests: list[Request] = []
        self._lock = threading.Lock()

    def record(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    @contextmanager
    def measure(self) -> Iterator[Requests]:
        """The requests made while the block ran (filled in when it ends)."""
        with self._lock:
            start = len(self._requests)
        measured = Requests()
        try:
            yield measured
        finally:
            with self._lock:
                measured.requests.extend(self._requests[start:])

    def since(self, start: int) -> list[Request]:
        with self._lock:
            return self._requests[start:]

    def __len__(self) -> int:
        with self._lock:
            return len(self._requests)


class RemoteRequestLog:
    """The :class:`RequestLog` of a server in another process, read over HTTP."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def _since(self, start: int) -> list[Request]:
        with urllib.request.urlopen(f"{self.endpoint}{LOG_PATH}?from={start}") as answer:
            return [Request(*r) for r in json.loads(answer.read())]

    @contextmanager
    def measure(self) -> Iterator[Requests]:
        start = len(self._since(0))
        measured = Requests()
        try:
            yield measured
        finally:
            measured.requests.extend(self._since(start))


# The log's own path on the server: answered by the middleware, never recorded, never moto's.
LOG_PATH = "/__requests__"


class _Counting:
    """WSGI middleware: record the request, then let moto answer it."""

    def __init__(self, app, log: RequestLog) -> None:  # noqa: ANN001
        self.app, self.log = app, log

    def __call__(self, environ, start_response):  # noqa: ANN001, ANN204
        path = environ.get("PATH_INFO", "")
        if path == LOG_PATH:
            start = int(environ.get("QUERY_STRING", "from=0").partition("=")[2] or 0)
            body = json.dumps(
                [[r.method, r.path, r.query, r.started, r.seconds] for r in self.log.since(start)]
            ).encode()
            start_response(
                "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
            )
            return [body]
        started = time.time()
        answer = self.app(environ, start_response)
        self.log.record(
            Request(
                environ["REQUEST_METHOD"],
                path,
                environ.get("QUERY_STRING", ""),
                started,
                time.time() - started,
            )
        )
        return answer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CountingS3Server:
    """moto's threaded S3 server on a free loopback port, counting requests in :attr:`log`."""

    def __init__(self, port: int | None = None) -> None:
        self.log = RequestLog()
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server = None
        self._thread: threading.Thread | None = None

    def serve_forever(self) -> None:
        self.start()
        assert self._thread is not None
        self._thread.join()

    def start(self) -> CountingS3Server:
        # What moto's ThreadedMotoServer does, with the app wrapped; the server is made here (an
        # error raises) and only its loop runs in the thread.
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log line per request
        app = _Counting(DomainDispatcherApplication(create_backend_app), self.log)
        self._server = make_server("127.0.0.1", self.port, app, True, request_handler=MotoRequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="counting-s3", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            # moto keeps its buckets in process-wide state, shared by every server of the process:
            # without a reset, the next test's server (same worker, same bucket name) would start
            # with this one's objects in it.
            import urllib.request

            urllib.request.urlopen(
                urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
            ).close()
            self._server.shutdown()
        if self._thread is not None:
            self._thread.join()

    def client(self):  # noqa: ANN201
        """A boto3 S3 client of the server (to create buckets and list what the tests wrote)."""
        return _client(self.endpoint)


class S3ServerProcess:
    """:class:`CountingS3Server` in a process of its own (this file run as a script), with its own
    moto state; stopped with the process."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = RemoteRequestLog(self.endpoint)
        self._process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 120.0) -> S3ServerProcess:
        self._process = subprocess.Popen(
            [sys.executable, __file__, "--port", str(self.port)], stdout=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout_s  # moto's import is seconds on a busy machine
        while True:
            try:
                self.log._since(0)
                return self
            except OSError:
                if self._process.poll() is not None:
                    raise RuntimeError(
                        f"the S3 server process exited with {self._process.returncode}"
                    ) from None
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"the S3 server process did not answer on {self.endpoint} in {timeout_s:.0f} s"
                    ) from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=60)

    def client(self):  # noqa: ANN201
        return _client(self.endpoint)


def _client(endpoint: str):  # noqa: ANN202
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    )


def storage_properties(endpoint: str) -> dict[str, str]:
    """The catalog properties of the server's store, in pyiceberg's names."""
    return {
        "s3.endpoint": endpoint,
        "s3.access-key-id": KEY_ID,
        "s3.secret-access-key": SECRET,
        "s3.region": "us-east-1",
        "s3.path-style-access": "true",
    }


def catalog_properties(catalog_db: str, endpoint: str, warehouse: str) -> dict[str, str]:
    """A SQL catalog on SQLite at ``catalog_db`` whose warehouse and files are on the S3 server at ``endpoint``."""
    return {
        "type": "sql",
        "uri": f"sqlite:///{catalog_db}",
        "warehouse": warehouse,
        **storage_properties(endpoint),
    }


def objects(client, prefix: str, bucket: str = BUCKET) -> list[str]:  # noqa: ANN001
    """The keys in ``bucket`` under ``prefix``, sorted."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


@contextmanager
def s3_server(
    bucket: str = BUCKET, *, own_process: bool = False
) -> Iterator[CountingS3Server | S3ServerProcess]:
    """A started server with ``bucket`` created; stopped when the block ends. ``own_process``: in a
    process of its own (see the module's doc)."""
    server = S3ServerProcess().start() if own_process else CountingS3Server().start()
    try:
        client = server.client()
        leaked = [b["Name"] for b in client.list_buckets().get("Buckets", [])]
        assert not leaked, f"moto's process-wide state still holds buckets {leaked}: a server was not stopped"
        client.create_bucket(Bucket=bucket)
        yield server
    finally:
        server.stop()


@contextmanager
def moto_s3(bucket: str = BUCKET) -> Iterator[tuple[str, object]]:
    """:func:`s3_server` as its endpoint and a boto3 client, for tests that do not count requests."""
    with s3_server(bucket) as server:
        yield server.endpoint, server.client()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="A counting S3 API server (moto) on a loopback port.")
    parser.add_argument("--port", type=int, required=True)
    CountingS3Server(parser.parse_args().port).serve_forever()
