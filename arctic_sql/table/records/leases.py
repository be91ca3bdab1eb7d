"""Write leases: how orphan removal sees the writes still in progress.

A statement writes its Parquet files (and, when it commits, pyiceberg's manifests and metadata)
before the commit makes them referenced. Until then they look exactly like orphans. Guessing from
their age is what lost data here: a forced ``remove_orphan_files`` deleted the manifests of a
commit in flight. So every write takes a lease first:
``{table}/writes/{lease id}.json`` records when the write started and until when the lease holds.
A thread renews it while the write runs; it is removed once the commit's outcome is known (kept,
to run out, when it is not).

Orphan removal reads the live leases *before* it reads the table's metadata, and never deletes a
file modified after the oldest live lease started (nor within :data:`CLOCK_SKEW_MS` of it): every
file a write in flight can produce is newer than its lease. A write that starts after orphan
removal read the leases writes only files newer than its ``older_than``. Optimizing processes are
leased by their process records (table/records/optimizing_processes.py), which orphan removal reads the same way.

A writer killed without cleanup leaves its lease until it expires (:data:`LEASE_MS`); until then
orphan removal only postpones the files written since.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from arctic_sql.errors import CommitStateUnknownError
from arctic_sql.table.files import storage
from arctic_sql.table.format import layout

if TYPE_CHECKING:
    from arctic_sql.table.model.table import ArcticTable

log = logging.getLogger(__name__)

# How long a lease holds without renewal: also how long a writer that died keeps orphan removal off
# the files made since it started. ARCTIC_WRITE_LEASE_SECONDS sets it (the writer's setting is what
# its lease records, so writers and removers need not agree on it).
LEASE_MS = int(float(os.environ.get("ARCTIC_WRITE_LEASE_SECONDS", "600")) * 1000)
RENEW_MS = max(LEASE_MS // 4, 100)  # a running write renews its lease this often
# A task's lease (DataFrame writer, streaming sink) has no renewal thread: its process ends before the
# job commits, which may be much later. So it holds a day (or LEASE_MS if longer) unless released;
# a driver killed before its commit keeps orphan removal off the files made since for that long
# (orphan removal's default safety window is two days anyway).
TASK_LEASE_MS = max(LEASE_MS, 24 * 3_600_000)
CLOCK_SKEW_MS = 60_000  # nor files this much older than a lease's start (the clocks of writers and storage)
FOLDER = "writes"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Lease:
    """One write in progress on one table."""

    lease_id: str
    operation: str
    started_ms: int
    expires_ms: int
    host: str
    pid: int
    committing: bool = False  # the write's commit has been sent: its files may be referenced

    @property
    def live(self) -> bool:
        return now_ms() < self.expires_ms


def folder(table_root: str) -> str:
    return f"{table_root.rstrip('/')}/{FOLDER}"


def save(table_root: str, lease: Lease) -> None:
    storage.replace_file(
        f"{folder(table_root)}/{lease.lease_id}.json", json.dumps(asdict(lease), sort_keys=True).encode()
    )


def _remove(table_root: str, lease: Lease) -> None:
    """End ``lease``. On an object store the record is rewritten as run out (one PUT), not deleted:
    pyarrow's delete is three requests there (a HEAD, the DELETE, and a PUT recreating the folder's
    marker). A run-out lease protects nothing, and :func:`expire` (orphan removal) deletes it later."""
    if storage.is_object_store(table_root):
        save(table_root, dataclasses.replace(lease, expires_ms=min(lease.expires_ms, now_ms())))
    else:
        _delete(table_root, lease.lease_id)


def _delete(table_root: str, lease_id: str) -> None:
    storage.delete_files([f"{folder(table_root)}/{lease_id}.json"])


def take(table_root: str, operation: str) -> Lease:
    """A lease for a write whose files one process writes and another commits (a task of the
    DataFrame writer or the streaming sink): no renewal thread; it holds for :data:`TASK_LEASE_MS`
    unless :func:`release` ends it (the commit or the abort does)."""
    started = now_ms()
    lease = Lease(
        uuid.uuid4().hex, operation, started, started + TASK_LEASE_MS, socket.gethostname(), os.getpid()
    )
    save(table_root, lease)
    return lease


def find(table_root: str, lease_id: str) -> Lease | None:
    """The lease, or None once it has ended: released (deleted, or on an object store rewritten as
    run out: see :func:`_remove`) or run out."""
    fs, path = storage.filesystem(f"{folder(table_root)}/{lease_id}.json")
    try:
        with fs.open_input_stream(path) as stream:
            lease = Lease(**json.loads(stream.read()))
    except FileNotFoundError:
        return None
    return lease if lease.live else None


def release(table_root: str, lease_id: str) -> None:
    now = now_ms()
    _remove(table_root, Lease(lease_id, "released", now, now, socket.gethostname(), os.getpid()))


def leases(table_root: str) -> list[Lease]:
    """Every lease of the table, live or run out. An unreadable lease file raises: orphan removal
    must not go on without knowing what is in flight."""
    return [Lease(**record) for record in storage.json_records(folder(table_root))]


def live_leases(table_root: str) -> list[Lease]:
    return [lease for lease in leases(table_root) if lease.live]


def running(table_root: str, operation: str) -> bool:
    """Whether a live lease of ``operation`` (a tag being made, an expiration) is on the table."""
    return any(lease.operation == operation for lease in live_leases(table_root))


def others(table_root: str, operation: str, lease_id: str) -> list[Lease]:
    """The live leases of ``operation`` on the table other than ``lease_id``: read after taking
    ``lease_id``, so of two that start together at least one sees the other (the one that keeps
    going alone never overlaps it)."""
    return [
        lease
        for lease in live_leases(table_root)
        if lease.operation == operation and lease.lease_id != lease_id
    ]


def ended_paths(table_root: str) -> list[str]:
    """The records of the leases that have ended (what :func:`expire` would delete): a table's own
    files, which a purge deletes with the rest."""
    return [f"{folder(table_root)}/{lease.lease_id}.json" for lease in leases(table_root) if not lease.live]


def expire(table_root: str) -> int:
    """Remove leases that ran out (their writers died, or ended them on an object store); return how many."""
    gone = [lease for lease in leases(table_root) if not lease.live]
    for lease in gone:
        _delete(table_root, lease.lease_id)
    return len(gone)


class _Renewal:
    """Renews a lease every :data:`RENEW_MS` until stopped."""

    def __init__(self, table_root: str, lease: Lease) -> None:
        self.table_root, self.lease = table_root, lease
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"arctic-lease-{lease.lease_id[:8]}", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(RENEW_MS / 1000):
            self.lease.expires_ms = now_ms() + LEASE_MS
            try:
                save(self.table_root, self.lease)
            except OSError as e:  # the lease still holds until it expires; try again next time
                log.warning("could not renew write lease %s: %s", self.lease.lease_id, e)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def writing(table: ArcticTable, operation: str) -> Iterator[Lease]:
    """Hold a lease on ``table`` while the block writes and commits.

    The lease is released when the block ends, except when it ends in
    :class:`~arctic_sql.errors.CommitStateUnknownError`: then the files may or may not be referenced,
    and the lease runs out on its own, giving the commit's fate time to become known.
    """

    table_root = layout.table_root(table.base.location())
    started = now_ms()
    lease = Lease(uuid.uuid4().hex, operation, started, started + LEASE_MS, socket.gethostname(), os.getpid())
    save(table_root, lease)  # before any file of the write exists
    renewal = _Renewal(table_root, lease)
    keep = False
    try:
        yield lease
    except CommitStateUnknownError:
        keep = True
        raise
    finally:
        renewal.stop()
        if not keep:
            _remove(table_root, lease)
