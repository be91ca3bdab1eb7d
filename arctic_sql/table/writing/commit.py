"""The committer: the only code that writes table metadata.

Data commits (below), and the metadata-only changes at the end of this module: properties, schema
evolution and snapshot expiration. DDL, ALTER TABLE, maintenance and the catalog's PURGE journal go
through those, so every metadata write is found here.

- Change-store commits are appends; pyiceberg retries them on conflict, and the sequence number the
  append finally lands at is the transaction number.
- Base-store commits carry the per-partition watermark, which pyiceberg cannot re-derive when it
  replays a commit. The base store is created with pyiceberg's retries off, and
  :func:`commit_base` rebuilds the commit from the fresh table state on every attempt: the
  ``build`` callback re-validates (and may refuse with CommitConflictError) before anything lands.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
    ManifestWriterV2,
)
from pyiceberg.table import Table, Transaction
from pyiceberg.table.snapshots import Operation, Snapshot
from pyiceberg.table.update import TableRequirement
from pyiceberg.table.update.snapshot import _SnapshotProducer

from arctic_sql.errors import CommitConflictError, CommitStateUnknownError, InvalidArgumentError
from arctic_sql.faults import fault_point
from arctic_sql.table.files import position_deletes, storage
from arctic_sql.table.files.manifests import manifest_entries
from arctic_sql.table.format import versions
from arctic_sql.table.format.partitioning import record_from_path
from arctic_sql.table.writing import fast_forward_intents

if TYPE_CHECKING:
    from pyiceberg.table.update.schema import UpdateSchema
    from pyiceberg.table.update.snapshot import ManageSnapshots

    from arctic_sql.table.model.table import ArcticTable

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 20


class _FloatStatisticsLeftOut(logging.Filter):
    """Drops pyiceberg's "PyArrow statistics missing for column N" warning for the FLOAT and DOUBLE
    columns of the file being registered, which our writers leave without statistics on purpose
    (arrow_writer.statistics_columns: NaN-safe bounds); one line per file per commit otherwise. The
    warning about any other column still shows."""

    MESSAGE = "PyArrow statistics missing for column %d when writing file"
    current = threading.local()  # the footer being registered on this thread

    def filter(self, record: logging.LogRecord) -> bool:
        metadata = getattr(self.current, "metadata", None)
        if metadata is None or record.msg != self.MESSAGE or not record.args or metadata.num_row_groups == 0:
            return True
        position = record.args[0] if isinstance(record.args, tuple) else None
        if not isinstance(position, int) or not 0 <= position < metadata.num_columns:
            return True
        return metadata.row_group(0).column(position).physical_type not in ("FLOAT", "DOUBLE")


logging.getLogger("pyiceberg.io.pyarrow").addFilter(_FloatStatisticsLeftOut())


def data_files(
    store: Table, paths: Iterable[str], footers: Mapping[str, tuple[int, pq.FileMetaData]] | None = None
) -> list[DataFile]:
    """Iceberg entries for Parquet files written by a writer: data files with stats from footers and
    partition from paths, and position-delete files (by name, see position_deletes.py).

    ``footers`` holds the size and footer of files whose writer kept them (arrow_writer.WrittenFile):
    those are not read back.
    """
    schema, spec, io = store.schema(), store.spec(), store.io
    stats_plan = compute_statistics_plan(schema, store.properties)
    mapping = parquet_path_to_id_mapping(schema)
    footers = footers or {}

    def read(path: str) -> tuple[int, pq.FileMetaData]:
        input_file = io.new_input(path)
        with input_file.open() as stream:
            return len(input_file), pq.read_metadata(stream)

    def one(path: str, size: int, metadata: pq.FileMetaData) -> DataFile:
        _FloatStatisticsLeftOut.current.metadata = metadata
        try:
            stats = data_file_statistics_from_parquet_metadata(metadata, stats_plan, mapping)
        except OverflowError as e:  # Python's dates stop at years 1 and 9999; Spark's do not
            raise InvalidArgumentError(
                f"A DATE or TIMESTAMP outside the years 1 to 9999 cannot be written ({e}); "
                "nothing was committed"
            ) from None
        finally:
            _FloatStatisticsLeftOut.current.metadata = None
        return DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=path,
            file_format=FileFormat.PARQUET,
            partition=record_from_path(path, spec, schema),
            file_size_in_bytes=size,
            sort_order_id=None,
            spec_id=spec.spec_id,
            equality_ids=None,
            key_metadata=None,
            **stats.to_serialized_dict(),
        )

    paths = list(paths)
    unread = [p for p in paths if p not in footers and not position_deletes.is_delete_file(p)]
    if len(unread) > 1:
        with ThreadPoolExecutor(max_workers=min(8, len(unread))) as pool:
            footers = {**footers, **dict(zip(unread, pool.map(read, unread), strict=True))}
    elif unread:
        footers = {**footers, unread[0]: read(unread[0])}
    return [
        position_deletes.data_file(store, path)
        if position_deletes.is_delete_file(path)
        else one(path, *footers[path])
        for path in paths
    ]


def _landed(store: Table, commit_id: str) -> Snapshot:
    """Our snapshot in the metadata the catalog answered the commit with (``store.metadata`` after a
    successful commit): no reload, so nothing another writer does afterwards can hide it."""
    for snap in reversed(store.snapshots()):
        if versions.summary_of(snap).get(versions.COMMIT_ID) == commit_id:
            return snap
    raise LookupError(f"commit {commit_id} is not in the table's metadata")


def _look_for(store: Table, commit_id: str) -> Snapshot | None:
    """Our snapshot if a reload shows it landed; None if it is not there or the reload failed (its
    absence proves nothing: expiration may already have removed it)."""
    try:
        store.refresh()
        return _landed(store, commit_id)
    except Exception:  # noqa: BLE001 - the original error is the one to report
        return None


def _unknown(table: ArcticTable, e: BaseException) -> CommitStateUnknownError:
    reason = f"{type(e).__name__}: {str(e).strip()}" if str(e).strip() else type(e).__name__
    return CommitStateUnknownError(
        f"Commit to {table.identifier} may or may not have landed ({reason}); "
        "its files are kept: check the table's history before retrying"
    )


def commit_change(
    table: ArcticTable,
    paths: list[str],
    operation: str,
    validate: Callable[[Table], None] | None = None,
    summary: dict[str, str] | None = None,
    footers: Mapping[str, tuple[int, pq.FileMetaData]] | None = None,
    fresh: bool = False,
) -> int:
    """Append change files as one transaction; return its number (the change store's sequence number).

    ``validate`` runs against the freshly loaded change store before every attempt; whatever it
    raises aborts the commit and deletes the written files. ``summary`` adds snapshot-summary
    entries (a streaming sink's query and batch ids); ``footers`` as for :func:`data_files`;
    ``fresh`` as for :func:`commit_loop`.
    """
    assert table.change is not None
    files = data_files(table.change, paths, footers)
    upserted = sum(f.record_count for f in files if "arctic_op=upsert" in f.file_path)
    summary = {
        **(summary or {}),
        versions.OPERATION: operation,
        versions.UPSERTED_ROWS: str(upserted),
        versions.DELETED_ROWS: str(sum(f.record_count for f in files) - upserted),
    }
    store = table.change

    def apply(tx: Transaction, commit_id: str) -> None:
        yield_to_maintenance(store)
        if validate is not None:
            validate(store)
        properties = {**summary, versions.COMMIT_ID: commit_id}
        with tx.update_snapshot(
            snapshot_properties=properties
        ).merge_append() as append:  # see catalog._STORE_DEFAULTS
            for data_file in files:
                append.append_data_file(data_file)

    return versions.sequence_of(commit_loop(table, store, apply, paths, fresh=fresh))


class _Transaction(Transaction):
    """pyiceberg's Transaction with ``table_metadata`` computed once per staged change.

    pyiceberg rebuilds the metadata, and deep-copies all of it, on every read of
    ``table_metadata``, and a snapshot producer reads it about fifteen times per commit: a commit's
    cost grew with the store's snapshot count (an append of 100 rows took 90 ms at 50 snapshots
    and 760 ms at 550, which a stream committing every minute reaches in nine hours). The metadata
    models are frozen, so the readers can share one copy until the next staged update or refresh.
    pyiceberg 0.12 has no public hook for this; the subclass reads its ``_table``/``_updates``.
    pyiceberg's maintainers have the same cache (keyed the same way) under review: drop this class
    once a release has it. (The deep copy itself is shallow in arctic-sql: metadata_cache.py.)
    """

    _memo: tuple[object, object, object] | None = None

    def require(self, requirement: TableRequirement) -> None:
        """Add ``requirement`` to the commit. pyiceberg's ``_stage`` keeps one requirement per type,
        and a commit that moves ``main`` already asserts a ref; this one asserts another."""
        self._requirements += (requirement,)

    @property
    def table_metadata(self):  # noqa: ANN201 - pyiceberg's TableMetadata
        base, updates = self._table.metadata, self._updates
        if not updates:
            return base  # nothing staged: the table's own (immutable) metadata, no copy
        memo = self._memo
        if memo is None or memo[0] is not base or memo[1] is not updates:
            memo = self._memo = (base, updates, super().table_metadata)
        return memo[2]


class _RewriteFiles(_SnapshotProducer["_RewriteFiles"]):
    """One snapshot that removes and adds files of either content: data and position deletes.

    pyiceberg 0.12 writes no delete files: its producers put every added file in a data manifest,
    and its overwrite rewrites a delete manifest it touches as a data manifest. This producer
    keeps each file in a manifest of its own content (Iceberg's rule), and leaves every manifest
    without a removed file as it is. The snapshot summary is pyiceberg's, which counts delete
    files apart. It subclasses pyiceberg's private ``_SnapshotProducer``: there is no public way
    to commit delete files (a gap to close upstream). ``commit_loop`` re-validates each attempt,
    so pyiceberg's own concurrency validation is not needed.
    """

    def _validate_concurrency(self) -> None:
        pass

    def _existing_manifests(self) -> list[ManifestFile]:  # _manifests below does the whole job
        return []

    def _deleted_entries(self) -> list[ManifestEntry]:
        return []

    def _writer(self, spec_id: int, content: ManifestContent) -> ManifestWriter:
        spec = self.spec(spec_id)
        if content == ManifestContent.DATA:
            return self.new_manifest_writer(spec)
        return _DeleteManifestWriter(
            spec, self.schema(), self.new_manifest_output(), self._snapshot_id, self._compression
        )

    def _manifests(self) -> list[ManifestFile]:
        removed = {f.file_path for f in self._deleted_data_files}
        kept: list[ManifestFile] = []
        gone: dict[tuple[int, ManifestContent], list[ManifestEntry]] = defaultdict(list)
        parent = (
            self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id)
            if self._parent_snapshot_id is not None
            else None
        )
        for manifest in parent.manifests(self._io) if parent is not None else []:
            entries = manifest_entries(self._io, manifest)
            if not any(e.data_file.file_path in removed for e in entries):
                kept.append(manifest)
                continue
            remaining = [e for e in entries if e.data_file.file_path not in removed]
            gone[(manifest.partition_spec_id, manifest.content)].extend(
                e for e in entries if e.data_file.file_path in removed
            )
            if remaining:
                with self._writer(manifest.partition_spec_id, manifest.content) as writer:
                    for entry in remaining:
                        writer.existing(entry)
                kept.append(writer.to_manifest_file())
        found = {e.data_file.file_path for entries in gone.values() for e in entries}
        if found != removed:
            missing = sorted(removed - found)[:3]
            raise ValidationException(f"files to remove are not in the table: {', '.join(missing)}")
        written = []
        spec_id = self._transaction.table_metadata.spec().spec_id
        for content in (ManifestContent.DATA, ManifestContent.DELETES):
            added = [
                f
                for f in self._added_data_files
                if (f.content == DataFileContent.DATA) == (content == ManifestContent.DATA)
            ]
            if added:
                with self._writer(spec_id, content) as writer:
                    for data_file in added:
                        writer.add(
                            ManifestEntry.from_args(
                                status=ManifestEntryStatus.ADDED,
                                snapshot_id=self._snapshot_id,
                                data_file=data_file,
                            )
                        )
                written.append(writer.to_manifest_file())
        for (manifest_spec, content), removed_entries in gone.items():
            with self._writer(manifest_spec, content) as writer:
                for entry in removed_entries:
                    writer.delete(entry)
            written.append(writer.to_manifest_file())
        return written + kept


class _DeleteManifestWriter(ManifestWriterV2):
    """A v2 manifest of delete files (pyiceberg's writer only declares data manifests)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def commit_loop(
    table: ArcticTable,
    store: Table,
    apply: Callable[[Transaction, str], None],
    written: list[str],
    *,
    fresh: bool = False,
) -> Snapshot:
    """Commit ``apply``'s changes to ``store``, re-running ``apply`` on fresh metadata after a lost race.

    ``store`` is reloaded before every attempt, except the first when ``fresh`` (the caller loaded
    it just now, as the DataFrame writer's commit does): the catalog refuses a commit made on stale
    metadata (pyiceberg asserts the branch's snapshot id), and the retry then reloads.

    pyiceberg's own retries are off on both stores (catalog.py): a replayed commit would skip the
    checks ``apply`` makes. ``written`` (the files the commit adds) are deleted only when the commit
    is known not to have landed: ``apply`` refused, the catalog rejected every attempt, or the
    statement stopped before sending it. Once the commit is sent, any failure but the catalog's
    rejection leaves its outcome unknown: the files stay (orphan removal takes them if it did not
    land) and the statement fails with :class:`CommitStateUnknownError`, as Iceberg does.
    """
    commit_id = uuid.uuid4().hex
    for attempt in range(MAX_ATTEMPTS):
        try:
            if attempt or not fresh:
                store.refresh()
            if fast_forward_intents.settle(table, fresh=store):
                continue  # a fast-forward of this branch was pending and is done now: start again
            fault_point("before-commit")
            tx = _Transaction(store)
            apply(tx, commit_id)
            if store is table.change and store.metadata.snapshots:  # (the assertion needs one)
                tx.require(fast_forward_intents.guard(table.identifier.branch))
        except BaseException:
            storage.delete_files(written)  # nothing was sent
            raise
        try:
            tx.commit_transaction()
        except ValidationException as e:  # pyiceberg's own retry found the commit invalid: not landed
            storage.delete_files(written)
            raise CommitConflictError(
                f"Commit to {table.identifier} conflicted with another writer: {e}"
            ) from e
        except CommitFailedException:  # the catalog refused it: it did not land
            wait = min(0.02 * 2**attempt, 1.0) * (1 + random.random())
            log.info(
                "commit to %s lost a race (attempt %d); retrying in %.2fs",
                table.identifier,
                attempt + 1,
                wait,
            )
            time.sleep(wait)
            continue
        except Exception as e:
            landed = _look_for(store, commit_id)
            if landed is not None:
                log.warning("commit to %s reported %s but landed", table.identifier, type(e).__name__)
                return landed
            raise _unknown(table, e) from e
        except BaseException as e:  # Ctrl-C: stop at once, without asking the catalog
            raise _unknown(table, e) from e
        return _landed(store, commit_id)
    storage.delete_files(written)
    raise CommitConflictError(f"Commit to {table.identifier} kept conflicting with other writers")


def reserve_transaction(table: ArcticTable, operation: str) -> int:
    """Reserve a transaction number for a base-store data commit (INSERT OVERWRITE) with an empty
    change-store snapshot, as Amoro does; a crash after this leaves only that empty snapshot."""
    assert table.change is not None

    def apply(tx: Transaction, commit_id: str) -> None:
        properties = {
            versions.OPERATION: versions.BEGIN,
            versions.COMMIT_ID: commit_id,
            "arctic.for": operation,
        }
        with tx.update_snapshot(snapshot_properties=properties).fast_append():
            pass

    return versions.sequence_of(commit_loop(table, table.change, apply, []))


@dataclass
class BaseChange:
    """What one base-store commit does, built against a given table state."""

    delete: list[DataFile] = field(default_factory=list)
    add: list[DataFile] = field(default_factory=list)
    watermarks: dict[str, int] | None = None  # the full new map; None keeps the current one
    summary: dict[str, str] = field(default_factory=dict)


def commit_base(table: ArcticTable, build: Callable[[Table], BaseChange], written: list[str]) -> Snapshot:
    """Commit to the base store, rebuilding the change from the current state on every attempt.

    ``build`` sees the freshly loaded base store and returns what to commit; it raises
    CommitConflictError when the commit no longer makes sense.
    """
    store = table.base

    def apply(tx: Transaction, commit_id: str) -> None:
        change = build(store)
        current = store.current_snapshot()
        marks = change.watermarks if change.watermarks is not None else versions.watermarks_of(current)
        properties = {**change.summary, versions.COMMIT_ID: commit_id}
        if marks:
            properties[versions.WATERMARKS] = json.dumps(marks, sort_keys=True)
        if change.delete or any(position_deletes.is_position_deletes(f) for f in change.add):
            with _RewriteFiles(Operation.OVERWRITE, tx, store.io, snapshot_properties=properties) as rewrite:
                for data_file in change.delete:
                    rewrite.delete_data_file(data_file)
                for data_file in change.add:
                    rewrite.append_data_file(data_file)
        else:
            with tx.update_snapshot(snapshot_properties=properties).merge_append() as append:
                for data_file in change.add:
                    append.append_data_file(data_file)

    return commit_loop(table, store, apply, written)


def commit_reserved(
    table: ArcticTable, operation: str, build: Callable[[Table, int], BaseChange], written: list[str]
) -> tuple[Snapshot, int]:
    """Commit to a keyed table's base store under a reserved transaction number (INSERT OVERWRITE,
    TRUNCATE, rollback); return the snapshot and the number.

    A change committed after the reservation carries a higher number than this commit's rows and
    would win over them, though it was made from the version before (an UPDATE racing an INSERT
    OVERWRITE would bring back what the overwrite replaced). So every attempt first looks at the
    change store, and takes a new number when such a change landed: the commit then comes after it.
    """
    change = table.change
    assert change is not None
    reserved = [reserve_transaction(table, operation)]

    def checked(store: Table) -> BaseChange:
        change.refresh()
        if _data_committed_after(change, reserved[-1]):
            reserved.append(reserve_transaction(table, operation))
        return build(store, reserved[-1])

    return commit_base(table, checked, written), reserved[-1]


# How long a reservation may stay without a base commit before it counts as abandoned (its writer died,
# or took a higher number and committed under that): its base commit normally lands within a second.
PENDING_RESERVATION_MS = 30_000


def reservation_pending(base: Table, change: Table, after: int) -> bool:
    """Whether a reservation numbered above ``after`` may still land its base commit (an INSERT
    OVERWRITE, TRUNCATE or rollback between its last look at the change store and its base commit).

    A statement that read version ``after`` must not commit its changes then: they would carry a
    higher number than the overwrite's and win over its rows, though they were made from the rows
    before it (an UPDATE would bring back a row the overwrite removed). A reservation is settled once
    a base commit carries its number or a higher one, or after PENDING_RESERVATION_MS.
    """
    settled = max(
        (
            int(versions.summary_of(s)[versions.TXN])
            for s in base.metadata.snapshots
            if versions.TXN in versions.summary_of(s)
        ),
        default=-1,
    )
    oldest = time.time() * 1000 - PENDING_RESERVATION_MS
    return any(
        versions.sequence_of(s) > max(after, settled)
        and s.timestamp_ms > oldest
        and versions.operation_of(s) == versions.BEGIN
        for s in change.metadata.snapshots
    )


def _data_committed_after(change: Table, txn: int) -> bool:
    """Whether a data commit (not a reservation, optimizing or TTL) landed in the change store after ``txn``."""
    return any(
        versions.sequence_of(s) > txn
        and (s.summary.additional_properties.get(versions.OPERATION) if s.summary else None)
        not in versions.NON_DATA_OPERATIONS
        for s in change.metadata.snapshots
    )


# maintenance commits that appends would never let land --------------------------------------------
# A change-store maintenance commit that drops files (the change-data TTL) rewrites the manifests
# that hold them, seconds at thousands of live files, and a stream appending every second wins every
# race against it: it never lands (benchmarks/disk_bounded.py). So it first sets this property on
# the change store (a metadata-only commit, which appends do not conflict with), and appends read it
# from the metadata they load anyway: they wait until the maintenance commit has cleared it, or until
# the time it names has passed (the maintenance process died). Appends pay no request for it.
MAINTENANCE_PENDING_KEY = "arctic.maintenance-pending-until"
MAINTENANCE_PENDING_S = 30.0
_YIELD_POLL_S = 0.2


def announce_maintenance(store: Table) -> None:
    """Ask ``store``'s appenders to wait for this process's next commit (at most MAINTENANCE_PENDING_S)."""
    until = int((time.time() + MAINTENANCE_PENDING_S) * 1000)
    for attempt in range(
        MAX_ATTEMPTS
    ):  # a metadata-only commit: it loses a race only in the catalog's window
        try:
            store.refresh()
            set_properties(store, {MAINTENANCE_PENDING_KEY: str(until)})
            return
        except CommitFailedException:
            time.sleep(min(0.02 * 2**attempt, 1.0) * random.random())
    log.info("could not announce maintenance on %s; committing without it", store.name())


def clear_maintenance(tx: Transaction) -> None:
    """Stage the end of the wait in the maintenance commit itself (a no-op when nothing was announced)."""
    if MAINTENANCE_PENDING_KEY in tx.table_metadata.properties:
        tx.remove_properties(MAINTENANCE_PENDING_KEY)


def withdraw_maintenance(store: Table) -> None:
    """End the wait without a maintenance commit (it found nothing to do or failed)."""
    try:
        store.refresh()
        set_properties(store, removals=[MAINTENANCE_PENDING_KEY])
    except Exception as e:  # noqa: BLE001 - the wait ends by itself at the time it names
        log.info(
            "could not withdraw maintenance on %s (%s); it ends by itself", store.name(), type(e).__name__
        )


def yield_to_maintenance(store: Table) -> None:
    """Wait (reloading ``store``) while a maintenance commit announced on it is pending."""
    while True:
        try:
            until_ms = int(store.properties.get(MAINTENANCE_PENDING_KEY, "0"))
        except ValueError:
            return
        if until_ms <= time.time() * 1000:
            return
        time.sleep(_YIELD_POLL_S)
        store.refresh()


# metadata-only changes ----------------------------------------------------------------------------
def set_properties(
    store: Table, updates: Mapping[str, str] | None = None, removals: Iterable[str] = ()
) -> None:
    """Set ``updates`` and remove ``removals`` (those present) in one commit of ``store``'s metadata."""
    present = [key for key in removals if key in store.properties]
    if not updates and not present:
        return
    with store.transaction() as tx:
        if updates:
            tx.set_properties(dict(updates))
        if present:
            tx.remove_properties(*present)


def set_refs(table: ArcticTable, store: Table, change: Callable[[ManageSnapshots], ManageSnapshots]) -> None:
    """Commit ``change`` (steps of pyiceberg's ``ManageSnapshots``: create, move or remove a branch)
    to ``store``'s refs; CommitConflictError when another commit moved a ref it asserts."""
    try:
        change(store.manage_snapshots()).commit()
    except CommitFailedException as e:
        raise CommitConflictError(
            f"Changing the refs of {table.identifier} conflicted with another commit; try again"
        ) from e


def first_snapshot(table: ArcticTable, store: Table) -> None:
    """Give ``store`` an empty snapshot when it has none yet, so that a branch has one to name. It
    is no version (operation ``create``) and merges nothing (no watermark); losing a race to
    another first commit is fine."""
    if store.current_snapshot() is not None:
        return
    properties = {versions.OPERATION: versions.Operation.CREATE, versions.COMMIT_ID: uuid.uuid4().hex}
    try:
        with store.transaction() as tx, tx.update_snapshot(snapshot_properties=properties).fast_append():
            pass
    except CommitFailedException:
        store.refresh()
        if store.current_snapshot() is None:
            raise CommitConflictError(
                f"Could not give {table.identifier} its first snapshot; try again"
            ) from None


def evolve_schema(
    store: Table,
    change: Callable[[UpdateSchema], None],
    *,
    allow_incompatible: bool = False,
    properties: Mapping[str, str] | None = None,
) -> None:
    """Apply ``change`` to ``store``'s schema in one commit (pyiceberg checks the result), setting
    ``properties`` in the same commit."""
    tx = store.transaction()
    with tx.update_schema(allow_incompatible_changes=allow_incompatible) as update:
        change(update)
    if properties:
        tx.set_properties(dict(properties))
    tx.commit_transaction()


def expire_snapshots(
    store: Table, snapshot_ids: Iterable[int], properties: Mapping[str, str] | None = None
) -> None:
    """Remove ``snapshot_ids`` from ``store``'s metadata in one commit (files are deleted by the caller,
    which knows what no retained snapshot needs), setting ``properties`` in the same commit."""
    from pyiceberg.table.update.snapshot import ExpireSnapshots

    tx = store.transaction()
    if properties:
        tx.set_properties(dict(properties))
    ExpireSnapshots(tx).by_ids(list(snapshot_ids)).commit()  # staged in tx: one metadata commit for both
    tx.commit_transaction()
