"""Versions, watermarks and the snapshot-summary keys that record them (pure metadata, no Spark).

A *version* is the transaction number of a data commit. On a primary-key table that is the change
store's Iceberg sequence number: every INSERT/UPDATE/DELETE/MERGE is one change-store snapshot, and
an INSERT OVERWRITE first reserves a sequence number with an empty change-store snapshot and then
commits base files stamped with it (``arctic.txn``). On a table without a key, a version is the base
store's own sequence number.

Each base snapshot records, per partition, the highest change transaction already merged into it
(``arctic.watermarks``, JSON), committed atomically with the base files it describes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from arctic_sql.table.format.layout import Store

OPERATION = "arctic.operation"
COMMIT_ID = "arctic.commit-id"
TXN = "arctic.txn"
WATERMARKS = "arctic.watermarks"
UPSERTED_ROWS = "arctic.upserted-rows"
DELETED_ROWS = "arctic.deleted-rows"
# A streaming sink's commit names its query and micro-batch, so that a replayed batch is skipped.
STREAM_QUERY_ID = "arctic.stream.query-id"
STREAM_BATCH_ID = "arctic.stream.batch-id"


class Operation(StrEnum):
    """What a commit did, as its ``arctic.operation`` records it (a str: summaries store the value)."""

    CREATE = "create"
    CREATE_AS_SELECT = "create-as-select"
    INSERT = "insert"
    APPEND = "append"  # df.write's append to a table without a key; also Iceberg's own name for one
    WRITE = "write"  # df.write's upserts and deletes on a keyed table
    STREAM = "stream"  # one micro-batch of the streaming sink
    OVERWRITE = "overwrite"
    DELETE = "delete"
    UPDATE = "update"
    MERGE = "merge"
    TRUNCATE = "truncate"
    ROLLBACK = "rollback"
    REFRESH = "refresh"  # a materialized view's refresh (statements/materialized_views.py)
    BEGIN = "begin"  # an empty change-store snapshot that reserves a transaction number
    OPTIMIZE = "optimize"
    CHANGE_TTL = "change-ttl"  # drops change files already merged into the base from the change store


BEGIN, OPTIMIZE, CHANGE_TTL = Operation.BEGIN, Operation.OPTIMIZE, Operation.CHANGE_TTL
NON_DATA_OPERATIONS = frozenset({BEGIN, OPTIMIZE, CHANGE_TTL, Operation.CREATE})
# Commits that rewrite files without changing any row: they belong to the version before them.
REWRITE_OPERATIONS = frozenset({OPTIMIZE})


@dataclass(frozen=True)
class Commit:
    """One data commit of a table: a row of ``db.t.history``."""

    version: int
    committed_at_ms: int
    operation: str
    store: Store
    snapshot_id: int
    summary: dict[str, str]


def summary_of(snapshot: Snapshot) -> dict[str, str]:
    return dict(snapshot.summary.additional_properties) if snapshot.summary is not None else {}


def operation_of(snapshot: Snapshot) -> str:
    summary = summary_of(snapshot)
    if OPERATION in summary:
        return summary[OPERATION]
    return snapshot.summary.operation.value if snapshot.summary is not None else "unknown"


def watermarks_of(snapshot: Snapshot | None) -> dict[str, int]:
    if snapshot is None:
        return {}
    raw = summary_of(snapshot).get(WATERMARKS)
    return {k: int(v) for k, v in json.loads(raw).items()} if raw else {}


def snapshots_in_order(table: Table) -> list[Snapshot]:
    """Snapshots of the current branch's ancestry, oldest first (rolled-back ones excluded)."""
    current = table.current_snapshot()
    return ancestry(table, current.snapshot_id if current is not None else None)[::-1]


def ancestry(table: Table, snapshot_id: int | None) -> list[Snapshot]:
    """Snapshot ``snapshot_id`` of ``table`` and its retained ancestors, newest first (none for None)."""
    return list(_walk_back(table, snapshot_id))


def _walk_back(table: Table, snapshot_id: int | None) -> Iterator[Snapshot]:
    """``ancestry``, one snapshot at a time: a caller that needs the newest few stops there."""
    by_id = _snapshots_by_id(table.metadata)
    current = by_id.get(snapshot_id) if snapshot_id is not None else None
    while current is not None:
        yield current
        current = by_id.get(current.parent_snapshot_id) if current.parent_snapshot_id is not None else None


# Each metadata's snapshots by id, kept by the metadata's identity (it is immutable, and loaded again
# unchanged it is the same object: table/files/metadata_cache.py). pyiceberg's snapshot_by_id scans
# the list, so a walk by it costs the square of the snapshots kept, and building the index on every
# walk costs a pass over all of them where a read by version needs the newest few.
_BY_ID: list[tuple[object, dict[int, Snapshot]]] = []
_BY_ID_KEPT = 16


def _snapshots_by_id(metadata: object) -> dict[int, Snapshot]:
    for kept, by_id in reversed(_BY_ID):
        if kept is metadata:
            return by_id
    by_id = {s.snapshot_id: s for s in metadata.snapshots}  # type: ignore[attr-defined]
    _BY_ID.append((metadata, by_id))
    del _BY_ID[:-_BY_ID_KEPT]
    return by_id


def data_commits(base: Table, change: Table | None) -> list[Commit]:
    """Every retained, readable data commit, oldest first. Optimizing and reservations are not versions."""
    return history(base, change).commits


@dataclass(frozen=True)
class History:
    """The versions a table still has: what ``VERSION AS OF`` and ``VERSION BETWEEN`` may name."""

    commits: list[Commit]  # readable data commits, oldest first
    complete: bool  # no snapshot was ever expired: changes can be read from version 0 on

    @property
    def oldest(self) -> int:
        return self.commits[0].version if self.commits else 0

    @property
    def latest(self) -> int:
        return self.commits[-1].version if self.commits else 0

    @property
    def first_start(self) -> int:
        """The smallest start an incremental read ``(start, end]`` may have."""
        return 0 if self.complete else self.oldest

    def describe(self) -> str:
        if not self.commits:
            return "none"
        first, last = self.commits[0], self.commits[-1]
        return (
            f"oldest version {first.version} at {_iso(first.committed_at_ms)}, "
            f"newest version {last.version} at {_iso(last.committed_at_ms)}"
        )


def _iso(ms: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).isoformat(timespec="milliseconds")


def sequence_of(snapshot: Snapshot) -> int:
    """A snapshot's sequence number, the version it makes (pyiceberg reads a missing one as 0)."""
    assert snapshot.sequence_number is not None
    return snapshot.sequence_number


def merged_point(snapshot: Snapshot) -> int:
    """The newest transaction a base snapshot's merged state includes (its watermarks and ``arctic.txn``)."""
    return max([*watermarks_of(snapshot).values(), int(summary_of(snapshot).get(TXN, 0))], default=0)


def _is_complete(chain: list[Snapshot]) -> bool:
    # Expiration removes the oldest snapshots (and pyiceberg clears the survivor's parent id), so a
    # store still has its whole history exactly when its oldest snapshot is its first: sequence 1.
    return not chain or sequence_of(chain[0]) <= 1


# The newest histories worked out, by the identity of the metadata they came from: metadata is
# immutable and, loaded again unchanged, the same object (table/files/metadata_cache.py), so a statement
# or a stream that asks several times pays for one walk of the snapshots, not one per question.
_HISTORIES: list[tuple[object, object, History]] = []
_HISTORIES_KEPT = 16


def history(base: Table, change: Table | None) -> History:
    """The table's data commits that can still be read, and whether any history was expired.

    After expiration a version ``v`` stays readable only while both snapshots that hold it are
    retained: the base snapshot whose merged state is at or before ``v`` and the change snapshot
    at ``v``. A crash between expiring the two stores therefore never exposes a half-expired version.
    The result is shared between callers with the same metadata: do not change it.
    """
    change_metadata = change.metadata if change is not None else None
    for kept_base, kept_change, kept in reversed(_HISTORIES):
        if kept_base is base.metadata and kept_change is change_metadata:
            return kept
    found = _history(base, change)
    _HISTORIES.append((base.metadata, change_metadata, found))
    del _HISTORIES[:-_HISTORIES_KEPT]
    return found


def _history(base: Table, change: Table | None) -> History:
    base_chain = snapshots_in_order(base)
    commits: list[Commit] = []
    if change is None:
        for snap in base_chain:
            op = operation_of(snap)
            if op not in NON_DATA_OPERATIONS:
                commits.append(
                    Commit(
                        sequence_of(snap),
                        snap.timestamp_ms,
                        op,
                        Store.BASE,
                        snap.snapshot_id,
                        summary_of(snap),
                    )
                )
        return History(commits, _is_complete(base_chain))
    change_chain = snapshots_in_order(change)
    for snap in change_chain:
        op = operation_of(snap)
        if op not in NON_DATA_OPERATIONS:
            commits.append(
                Commit(
                    sequence_of(snap),
                    snap.timestamp_ms,
                    op,
                    Store.CHANGE,
                    snap.snapshot_id,
                    summary_of(snap),
                )
            )
    for snap in base_chain:
        summary = summary_of(snap)
        if TXN in summary and operation_of(snap) not in NON_DATA_OPERATIONS:
            commits.append(
                Commit(
                    int(summary[TXN]),
                    snap.timestamp_ms,
                    operation_of(snap),
                    Store.BASE,
                    snap.snapshot_id,
                    summary,
                )
            )
    floor = 0
    if not _is_complete(base_chain):
        floor = merged_point(base_chain[0])
    if not _is_complete(change_chain):
        floor = max(floor, sequence_of(change_chain[0]))
    readable = [c for c in commits if c.version >= floor]
    complete = _is_complete(base_chain) and _is_complete(change_chain)
    return History(sorted(readable, key=lambda c: c.version), complete)


def last_stream_batch(store: Table, query_id: str) -> int | None:
    """The newest micro-batch of streaming query ``query_id`` among ``store``'s retained commits."""
    found = None
    for snap in snapshots_in_order(store):
        summary = (
            snap.summary.additional_properties if snap.summary is not None else {}
        )  # no copy: once per snapshot
        if summary.get(STREAM_QUERY_ID) == query_id:
            batch = int(summary[STREAM_BATCH_ID])
            found = batch if found is None else max(found, batch)
    return found


def base_snapshot_for(base: Table, version: int) -> Snapshot | None:
    """The newest base snapshot whose merged state is at or before ``version``."""
    current = base.current_snapshot()
    for snap in _walk_back(base, current.snapshot_id if current is not None else None):
        if merged_point(snap) <= version:
            return snap
    return None


def snapshot_at(store: Table, version: int) -> Snapshot | None:
    """The newest snapshot of a store that holds ``version``: its sequence number is at or below
    ``version``, or it only rewrote files (optimizing) after a snapshot that is.

    Walked back from the head, as far as that snapshot: sequence numbers grow along an ancestry
    (Iceberg gives each snapshot a higher one than its parent's), so every snapshot before it holds
    ``version`` too, and a read of a recent version looks at the newest few of 2,000 snapshots."""
    current = store.current_snapshot()
    newer: list[Snapshot] = []  # the snapshots after the one found, newest first
    for snap in _walk_back(store, current.snapshot_id if current is not None else None):
        if sequence_of(snap) <= version:
            chosen = snap
            for after in reversed(newer):  # optimizing right after it holds the same rows
                if operation_of(after) not in REWRITE_OPERATIONS:
                    break
                chosen = after
            return chosen
        newer.append(snap)
    return None
