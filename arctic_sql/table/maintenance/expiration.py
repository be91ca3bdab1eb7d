"""Keeping history only as long as asked: snapshot expiration, change-data TTL and purge of history
(DESIGN "Maintenance"; invariants 2, 3 and 5). Orphan removal is orphan_removal.py's, rollback
rollback.py's.

Destructive steps are conservative: a file is deleted only when no retained snapshot of either
store, no statistics file and no running optimize references it. Each step first commits the
metadata change (atomic, per store) and only then deletes files, so a crash at any point leaves a
readable table and, at worst, unreferenced files that orphan removal takes later.

Expiration works in versions, not snapshots: it keeps every version committed at or after
``older_than`` plus the newest ``retain_last`` versions (and every version from the oldest one a
live stream consumer or tag needs), and for the oldest kept version ``v0`` it
keeps the snapshots that hold it: the base snapshot whose merged state is at or before ``v0`` (which
may be much older than ``older_than``), the change snapshot at ``v0``, the snapshot that carries the
commit itself, the newest base snapshot carrying a watermark (as Amoro keeps its latest optimized
snapshot), and the snapshots a running optimize planned against (Amoro's
``min(now - keep.duration, running plan's snapshot)``). Everything older goes.
"""

from __future__ import annotations

import bisect
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table, Transaction
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Snapshot

from arctic_sql.errors import CommitConflictError, InvalidArgumentError
from arctic_sql.faults import fault_point
from arctic_sql.table.files import storage
from arctic_sql.table.format import layout, versions
from arctic_sql.table.format.layout import Store
from arctic_sql.table.maintenance import ownership
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading import tags
from arctic_sql.table.reading.scan import live_entries, live_files
from arctic_sql.table.records import clones, consumers, fast_forwards, leases
from arctic_sql.table.records.optimizing_processes import running_processes
from arctic_sql.table.writing import commit, fast_forward_intents, tag_writes

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile

log = logging.getLogger(__name__)

MINUTE_MS = 60_000
_ATTEMPTS = 10
TAG_WAIT_S = 10.0  # how long an expiration waits for a tag being created before it keeps everything


def now_ms() -> int:
    return int(time.time() * 1000)


# retention settings --------------------------------------------------------------------------------
def keep_duration_ms(table: ArcticTable) -> int:
    """``snapshot.keep.duration`` (minutes), or MaxCompute's ``acid.data.retain.hours`` when only it is set."""
    if "snapshot.keep.duration" not in table.properties and "acid.data.retain.hours" in table.properties:
        return table.settings.acid_data_retain_hours * 60 * MINUTE_MS
    return table.settings.snapshot_keep_duration * MINUTE_MS


def change_ttl_ms(table: ArcticTable) -> int:
    return table.settings.change_data_ttl_minutes * MINUTE_MS


# what files a set of snapshots needs ------------------------------------------------------------
@dataclass
class FileSet:
    """The files snapshots of one store reference, by kind."""

    data: set[str] = field(default_factory=set)
    manifests: set[str] = field(default_factory=set)
    manifest_lists: set[str] = field(default_factory=set)

    def add(self, store: Table, snapshot: Snapshot, store_name: str) -> None:
        self.data.update(f.path for f in live_entries(store, snapshot, store_name))  # delete files too
        self.manifests.update(m.manifest_path for m in snapshot.manifests(store.io))
        self.manifest_lists.add(snapshot.manifest_list)


def files_of(store: Table, snapshots: Iterable[Snapshot], store_name: str) -> FileSet:
    files = FileSet()
    for snap in snapshots:
        files.add(store, snap, store_name)
    return files


# expiration ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExpireResult:
    """What one expiration removed (a row of ``CALL system.expire_snapshots``)."""

    deleted_data_files: int = 0
    deleted_change_files: int = 0
    deleted_manifest_files: int = 0
    deleted_metadata_files: int = 0  # manifest lists and table metadata files
    expired_snapshots: int = 0
    removed_change_files: int = 0  # merged change files the change-data TTL dropped from the change store
    oldest_version: int = 0

    def row(self) -> tuple[int, ...]:
        return (
            self.deleted_data_files,
            self.deleted_change_files,
            self.deleted_manifest_files,
            self.deleted_metadata_files,
            self.expired_snapshots,
            self.removed_change_files,
            self.oldest_version,
        )


EXPIRE_OUTPUT = (
    "deleted_data_files_count long, deleted_change_files_count long, deleted_manifest_files_count long, "
    "deleted_metadata_files_count long, expired_snapshots_count long, "
    "removed_change_files_count long, oldest_version long"
)


@dataclass(frozen=True)
class StoreExpiry:
    """The snapshots of one store to expire and the files only they reference."""

    store_name: str  # base | change
    expire_ids: tuple[int, ...]
    data_files: frozenset[str]
    manifests: frozenset[str]
    metadata_files: frozenset[str]  # manifest lists and metadata.json files


def _index_of(chain: list[Snapshot], snapshot_id: int | None) -> int | None:
    for i, snap in enumerate(chain):
        if snap.snapshot_id == snapshot_id:
            return i
    return None


def _keep_from(
    table: ArcticTable, store_name: str, chain: list[Snapshot], v0: versions.Commit | None, running: list
) -> int:
    """Index in ``chain`` of the oldest snapshot that must stay."""
    if not chain:
        return 0
    keep = len(chain) - 1  # the current snapshot always stays
    if v0 is not None:
        candidates: list[Snapshot | None] = []
        if v0.store == store_name:
            candidates.append(next((s for s in chain if s.snapshot_id == v0.snapshot_id), None))
        if store_name == Store.BASE and table.is_keyed:
            candidates.append(versions.base_snapshot_for(table.base, v0.version))
        elif store_name == Store.CHANGE:
            candidates.append(versions.snapshot_at(chain_store(table, store_name), v0.version))
        for snap in candidates:
            # No snapshot at or before v0 (v0 predates the store's first snapshot, e.g. the first
            # optimize of the base): every snapshot of the chain serves a retained version.
            index = _index_of(chain, snap.snapshot_id) if snap is not None else 0
            if index is not None:
                keep = min(keep, index)
    if store_name == Store.BASE:
        marked = [i for i, s in enumerate(chain) if versions.WATERMARKS in versions.summary_of(s)]
        if marked:
            keep = min(keep, marked[-1])
    for record in running:
        index = _index_of(
            chain, record.base_snapshot_id if store_name == Store.BASE else record.change_snapshot_id
        )
        if index is not None:
            keep = min(keep, index)
    return keep


def chain_store(table: ArcticTable, store_name: str) -> Table:
    store = table.base if store_name == Store.BASE else table.change
    assert store is not None
    return store


def branch_ancestry(store: Table) -> set[int]:
    """The snapshots of ``store`` some branch other than main reads, or a pending fast-forward moves
    a branch to (records/fast_forwards.py): each head and its ancestors."""
    by_id = {s.snapshot_id: s for s in store.metadata.snapshots}
    kept: set[int] = set()
    for name, ref in store.metadata.refs.items():
        if name == MAIN_BRANCH or (
            ref.snapshot_ref_type != SnapshotRefType.BRANCH and not fast_forwards.is_intent_ref(name)
        ):
            continue
        current = by_id.get(ref.snapshot_id)
        while current is not None and current.snapshot_id not in kept:
            kept.add(current.snapshot_id)
            current = (
                by_id.get(current.parent_snapshot_id) if current.parent_snapshot_id is not None else None
            )
    return kept


def plan_expiry(table: ArcticTable, older_than_ms: int, retain_last: int) -> tuple[list[StoreExpiry], int]:
    """What expiring ``table`` would remove (pure metadata), and the oldest version it keeps."""
    history = versions.history(table.base, table.change)
    commits = history.commits
    kept = [c for c in commits if c.committed_at_ms >= older_than_ms] + commits[-retain_last:]
    # A live stream consumer reads the changes after its version; a live tag names its version.
    for needed in (consumers.oldest_needed(table), tags.oldest_needed(table)):
        if needed is not None:
            kept += [c for c in commits if c.version >= needed]
    v0 = min(kept, key=lambda c: c.version) if kept else None
    running = running_processes(table)
    plans = []
    stores = (
        [(Store.CHANGE, table.change), (Store.BASE, table.base)]
        if table.change is not None
        else [(Store.BASE, table.base)]
    )
    for store_name, store in stores:
        assert store is not None
        chain = versions.snapshots_in_order(store)
        keep_from = _keep_from(table, store_name, chain, v0, running)
        in_chain = {s.snapshot_id for s in chain}
        # A branch keeps its whole line of history, down to where it left main: its versions are
        # what it reads (reading/branches.py), and its head is its consistent pair with the other store.
        on_branches = branch_ancestry(store)
        # Snapshots off every branch's ancestry (a dropped branch's) go by age alone.
        stray = [
            s
            for s in store.snapshots()
            if s.snapshot_id not in in_chain
            and s.snapshot_id not in on_branches
            and s.timestamp_ms < older_than_ms
            and not any(
                r.base_snapshot_id == s.snapshot_id or r.change_snapshot_id == s.snapshot_id for r in running
            )
        ]
        expired = [s for s in chain[:keep_from] if s.snapshot_id not in on_branches] + stray
        if not expired:
            continue
        expired_ids = {s.snapshot_id for s in expired}
        retained = [s for s in store.snapshots() if s.snapshot_id not in expired_ids]
        gone, kept_files = files_of(store, expired, store_name), files_of(store, retained, store_name)
        oldest_kept_ms = min((s.timestamp_ms for s in retained), default=now_ms())
        old_metadata = {
            e.metadata_file for e in store.metadata.metadata_log if e.timestamp_ms < oldest_kept_ms
        }
        plans.append(
            StoreExpiry(
                store_name,
                tuple(sorted(expired_ids)),
                frozenset(gone.data - kept_files.data),
                frozenset(gone.manifests - kept_files.manifests),
                frozenset(
                    (gone.manifest_lists - kept_files.manifest_lists)
                    | (old_metadata - {store.metadata_location})
                ),
            )
        )
    return plans, v0.version if v0 is not None else 0


def expire_snapshots(
    table: ArcticTable,
    older_than_ms: int | None = None,
    retain_last: int | None = None,
    *,
    change_ttl: bool = True,
) -> ExpireResult:
    """Expire history older than ``older_than_ms`` (default: now - ``snapshot.keep.duration``) beyond
    the newest ``retain_last`` versions (default: ``snapshot.keep.min-count``) and delete the files
    no retained version needs. With ``change_ttl`` it first applies the change-data TTL.

    >>> expire_snapshots(session.table("db.t"), retain_last=5)  # doctest: +SKIP
    """
    if older_than_ms is None:
        older_than_ms = now_ms() - keep_duration_ms(table)
    if retain_last is None:
        retain_last = table.settings.snapshot_keep_min_count
    if retain_last < 1:
        raise InvalidArgumentError(f"retain_last must be 1 or more for {table.identifier}, got {retain_last}")
    # A fast-forward that died half-way is finished first: planned on the moved base with the older
    # change line, expiration would count versions of neither line (records/fast_forwards.py).
    fast_forward_intents.settle(table)
    removed = expire_change_data(table) if change_ttl and table.is_keyed else 0
    with leases.writing(table, tags.EXPIRING):  # its metadata files are unreferenced until the commit
        if _tag_in_the_making(table):
            log.info(
                "a tag or clone of %s is being created: expiration keeps every version this run",
                table.identifier,
            )
            return ExpireResult(
                removed_change_files=removed, oldest_version=versions.history(table.base, table.change).oldest
            )
        return _expire(table, older_than_ms, retain_last, removed)


def _tag_in_the_making(table: ArcticTable) -> bool:
    """Whether a tag or a shallow clone is being created after this expiration's lease was written
    (one created later waits for the lease to end, tags.py): it may name any version. Both take
    milliseconds, so wait a little for them first."""
    deadline = time.monotonic() + TAG_WAIT_S
    while tags.being_created(table) or leases.running(
        layout.table_root(table.base.location()), clones.CLONING
    ):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.2)
    return False


def _expire(table: ArcticTable, older_than_ms: int, retain_last: int, removed: int) -> ExpireResult:
    committed: list[StoreExpiry] = []  # what landed, also from an attempt that lost a race halfway
    for attempt in range(_ATTEMPTS):
        refresh_stores(table)
        if fast_forward_intents.settle(table):
            refresh_stores(table)
        tag_writes.drop_past_retention(table, now_ms())
        plans, oldest = plan_expiry(table, older_than_ms, retain_last)
        try:
            for plan in plans:
                store = chain_store(table, plan.store_name)
                recorded = (
                    _with_commit_time(store, versions.snapshots_in_order(store), set(plan.expire_ids))
                    if plan.store_name == Store.CHANGE
                    else {}
                )
                commit.expire_snapshots(store, plan.expire_ids, recorded)
                committed.append(plan)
                fault_point("expire-between-stores")
        except CommitFailedException:
            log.info(
                "expiring %s raced with a commit (attempt %d); planning again", table.identifier, attempt + 1
            )
            continue
        fault_point("expire-before-delete")
        return _delete_expired(table, committed, oldest, removed)
    _delete_expired(table, committed, 0, removed)
    raise CommitConflictError(f"Expiring snapshots of {table.identifier} kept conflicting with other commits")


def _delete_expired(table: ArcticTable, plans: list[StoreExpiry], oldest: int, removed: int) -> ExpireResult:
    """Delete what the committed ``plans`` left unreferenced, except files outside the table's folder
    and those a shallow clone claims (read now, after the commit: ownership.py)."""
    data = change = manifests = metadata = expired = 0
    for plan in plans:
        expired += len(plan.expire_ids)
        deleted = delete_paths(ownership.deletable(table, plan.data_files))
        if plan.store_name == Store.CHANGE:
            change += deleted
        else:
            data += deleted
        fault_point("expire-mid-delete")
        manifests += delete_paths(ownership.deletable(table, plan.manifests))
        metadata += delete_paths(ownership.deletable(table, plan.metadata_files))
    return ExpireResult(data, change, manifests, metadata, expired, removed, oldest)


def purge(table: ArcticTable) -> ExpireResult:
    """Drop all history before the current version at once (MaxCompute's ``purge``)."""
    return expire_snapshots(table, older_than_ms=now_ms() + 1, retain_last=1)


def refresh_stores(table: ArcticTable) -> None:
    table.base.refresh()
    if table.change is not None:
        table.change.refresh()


def delete_paths(paths: Iterable[str]) -> int:
    return storage.delete_files(sorted(paths))


# change-data TTL --------------------------------------------------------------------------------
# The change-data TTL needs each live change file's commit time, but expiration removes snapshots
# after snapshot.keep.duration (12 hours by default), long before the TTL (7 days by default) has
# passed: without a record, a file whose snapshot had expired looked as young as the oldest snapshot
# kept, and no change file was ever dropped. So each expiration of the change store records, in
# the same commit, the sequence number and commit time of the newest snapshot it removes: a file
# of a lower or equal sequence number was committed no later than that (sequence numbers grow with
# commit time along the store's history). Dropping the oldest records only loosens the bound.
COMMIT_TIMES_KEY = "arctic.change-commit-times"
COMMIT_TIMES_KEPT = 500


def commit_times_of(store: Table) -> list[tuple[int, int]]:
    """The (sequence number, commit time in ms) records of ``store``'s expired snapshots, in order."""
    try:
        return sorted(
            (int(seq), int(at)) for seq, at in json.loads(store.properties.get(COMMIT_TIMES_KEY, "[]"))
        )
    except (ValueError, TypeError):  # not ours to repair: fall back to the oldest snapshot kept
        return []


def _no_later_than(recorded: list[tuple[int, int]], sequence: int, otherwise: int) -> int:
    """The commit time of the first record at or after ``sequence``: a bound on that sequence's own."""
    i = bisect.bisect_left(recorded, (sequence, -1))
    return recorded[i][1] if i < len(recorded) else otherwise


def _with_commit_time(store: Table, chain: list[Snapshot], expired_ids: set[int]) -> dict[str, str]:
    """The store's commit-time records with the newest of the expired snapshots of ``chain`` added."""
    expired = [s for s in chain if s.snapshot_id in expired_ids and s.sequence_number is not None]
    if not expired:
        return {}
    newest = max(expired, key=versions.sequence_of)
    records = sorted({*commit_times_of(store), (newest.sequence_number, newest.timestamp_ms)})[
        -COMMIT_TIMES_KEPT:
    ]
    return {COMMIT_TIMES_KEY: json.dumps(records, separators=(",", ":"))}


def expire_change_data(table: ArcticTable, older_than_ms: int | None = None) -> int:
    """Drop from the change store the change files already merged into the base (at or below their
    partition's watermark) and committed before ``older_than_ms`` (default: now -
    ``change.data.ttl.minutes``). Unmerged change files always stay. Older snapshots still
    reference the dropped files, so time travel and incremental reads of retained versions keep
    working; expiration deletes the files once no retained snapshot needs them. Returns how many
    files were dropped."""
    if table.change is None:
        return 0
    if older_than_ms is None:
        older_than_ms = now_ms() - change_ttl_ms(table)
    change = table.change
    dropped = 0

    def apply(tx: Transaction, commit_id: str) -> None:
        nonlocal dropped
        doomed = _merged_change_files(table, older_than_ms)
        dropped = len(doomed)
        if not doomed:
            raise _NothingToDo()
        properties = {versions.OPERATION: versions.CHANGE_TTL, versions.COMMIT_ID: commit_id}
        commit.clear_maintenance(tx)
        with tx.update_snapshot(snapshot_properties=properties).overwrite() as overwrite:
            for data_file in doomed:
                overwrite.delete_data_file(data_file)

    with leases.writing(table, versions.CHANGE_TTL):
        # An idle run commits nothing: announcing and withdrawing would be two metadata commits of
        # the change store for each run, which the service makes every few minutes.
        if not _merged_change_files(table, older_than_ms):
            return 0
        commit.announce_maintenance(change)  # appends wait for this commit (commit.yield_to_maintenance)
        try:
            commit.commit_loop(table, change, apply, [])
        except BaseException as e:
            commit.withdraw_maintenance(change)
            if isinstance(e, _NothingToDo):
                return 0
            raise
    return dropped


def _merged_change_files(table: ArcticTable, older_than_ms: int) -> list[DataFile]:
    """The change files of the change store as loaded now that are merged into the base (at or below
    their partition's watermark, the base reloaded) and were committed before ``older_than_ms``."""
    change = table.change
    assert change is not None
    table.base.refresh()
    marks = versions.watermarks_of(table.base.current_snapshot())
    chain = versions.snapshots_in_order(change)
    committed_at = {s.sequence_number: s.timestamp_ms for s in chain}
    # A file whose commit has expired is older than the oldest snapshot still there, and than the
    # commit time recorded for a later sequence number (commit_times_of).
    oldest_ms = chain[0].timestamp_ms if chain else 0
    recorded = commit_times_of(change)

    def committed_by(sequence: int) -> int:
        exact = committed_at.get(sequence)
        return exact if exact is not None else min(oldest_ms, _no_later_than(recorded, sequence, oldest_ms))

    return [
        f.data_file
        for f in live_files(change, change.current_snapshot(), Store.CHANGE)
        if f.sequence_number <= marks.get(f.partition, 0) and committed_by(f.sequence_number) < older_than_ms
    ]


class _NothingToDo(Exception):
    """No change file is old enough and merged: nothing to commit."""
