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
from dataclasses import dataclass

from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

OPERATION = "arctic.operation"
COMMIT_ID = "arctic.commit-id"
TXN = "arctic.txn"
WATERMARKS = "arctic.watermarks"
UPSERTED_ROWS = "arctic.upserted-rows"
DELETED_ROWS = "arctic.deleted-rows"

BEGIN = "begin"  # an empty change-store snapshot that reserves a transaction number
OPTIMIZE = "optimize"
NON_DATA_OPERATIONS = frozenset({BEGIN, OPTIMIZE, "create"})
# Commits that rewrite files without changing any row: they belong to the version before them.
REWRITE_OPERATIONS = frozenset({OPTIMIZE})


@dataclass(frozen=True)
class Commit:
    """One data commit of a table: a row of ``db.t.history``."""

    version: int
    committed_at_ms: int
    operation: str
    store: str  # base | change
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
    chain: list[Snapshot] = []
    while current is not None:
        chain.append(current)
        current = table.snapshot_by_id(current.parent_snapshot_id) if current.parent_snapshot_id else None
    return chain[::-1]


def data_commits(base: Table, change: Table | None) -> list[Commit]:
    """Every retained data commit, oldest first. Optimizing and reservations are not versions."""
    commits: list[Commit] = []
    if change is None:
        for snap in snapshots_in_order(base):
            op = operation_of(snap)
            if op not in NON_DATA_OPERATIONS:
                commits.append(Commit(snap.sequence_number, snap.timestamp_ms, op, "base", snap.snapshot_id,
                                      summary_of(snap)))
        return commits
    for snap in snapshots_in_order(change):
        op = operation_of(snap)
        if op not in NON_DATA_OPERATIONS:
            commits.append(Commit(snap.sequence_number, snap.timestamp_ms, op, "change", snap.snapshot_id,
                                  summary_of(snap)))
    for snap in snapshots_in_order(base):
        summary = summary_of(snap)
        if TXN in summary and operation_of(snap) not in NON_DATA_OPERATIONS:
            commits.append(Commit(int(summary[TXN]), snap.timestamp_ms, operation_of(snap), "base",
                                  snap.snapshot_id, summary))
    return sorted(commits, key=lambda c: c.version)


def base_snapshot_for(base: Table, version: int) -> Snapshot | None:
    """The newest base snapshot whose merged state is at or before ``version``."""
    chosen = None
    for snap in snapshots_in_order(base):
        marks = watermarks_of(snap)
        summary = summary_of(snap)
        newest = max([*marks.values(), int(summary.get(TXN, 0))], default=0)
        if newest <= version:
            chosen = snap
    return chosen


def snapshot_at(store: Table, version: int) -> Snapshot | None:
    """The newest snapshot of a store that holds ``version``: its sequence number is at or below
    ``version``, or it only rewrote files (optimizing) after a snapshot that is."""
    chosen = None
    for snap in snapshots_in_order(store):
        if snap.sequence_number <= version or (chosen is not None and operation_of(snap) in REWRITE_OPERATIONS):
            chosen = snap
        else:
            break
    return chosen
