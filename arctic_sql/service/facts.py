"""What the service knows of each table, from metadata alone, cached per snapshot.

A table's :class:`TableFacts` (counts, sizes, health, whether optimizing is due) depend only on its
two stores' metadata, so they are computed once per (base, change) metadata location and kept until
a commit moves either. Listing a warehouse then costs one catalog query plus, per table, a look in
the cache: on a pyiceberg SQL catalog the metadata locations of every store come from one query
(:func:`_sql_locations`), so an unchanged table is not even loaded. Other catalogs load each table
(a metadata file read) and hit the cache on its snapshot ids.

What moves without a commit is read live but cheaply: the optimizing process records (a folder
listing, parsed again only when it changed) and time-based triggers (re-evaluated after
:data:`PENDING_REFRESH_MS`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow.fs as pafs

from arctic_sql.optimizer import evaluator, process
from arctic_sql.optimizer import service as optimizer_service
from arctic_sql.optimizer.inputs import Settings
from arctic_sql.service.health import (
    FAILED_OPTIMIZE_PENALTY,
    HealthScore,
    HealthSettings,
    Penalty,
    TableMeasure,
    health_score,
)
from arctic_sql.table.catalog import ArcticCatalog
from arctic_sql.table.files import storage
from arctic_sql.table.format import versions
from arctic_sql.table.format.layout import Store
from arctic_sql.table.model.identifiers import CHANGE_SUFFIX, STAGED_SUFFIX, TableIdentifier
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading.scan import live_files
from arctic_sql.table.records import hive_syncs
from arctic_sql.table.records import optimizing_processes as state

log = logging.getLogger(__name__)

PENDING_REFRESH_MS = 60_000  # as the optimizer re-evaluates an unchanged table (interval triggers)
KIND_KEYED, KIND_APPEND = "primary-key", "append-only"
STATUSES = ("idle", "pending", "failed", "minor", "major", "full", "committing")


@dataclass(frozen=True)
class TableFacts:
    """One table as ``GET /tables`` lists it; everything here is fixed by the two snapshots."""

    name: str
    kind: str
    root: str  # the table's folder: optimizing and maintenance records live under it
    base_snapshot_id: int | None
    change_snapshot_id: int | None
    records: int  # rows in live base files + unmerged change rows (exact once fully merged)
    base_files: int
    change_files: int  # live change files, merged ones included (until the change-data TTL drops them)
    base_bytes: int
    change_bytes: int
    unmerged_change_files: int
    unmerged_change_rows: int
    oldest_unmerged_change_ms: int | None
    last_commit_at_ms: int | None
    latest_version: int
    partitions: int
    group: str
    quota: float
    health: HealthScore
    pending_modes: tuple[str, ...]  # what the triggers said at evaluated_ms
    pending_reasons: tuple[str, ...]
    evaluated_ms: int
    # (committed at, store: 0 base / 1 change, total bytes, total files) per retained snapshot of
    # each store, from the snapshot summaries: the warehouse's data-size chart, without a scan.
    size_points: tuple[tuple[int, int, int, int], ...] = ()
    # The version the table's Hive view shows (hive.compatible tables that have synced), else None.
    hive_version: int | None = None

    @property
    def bytes(self) -> int:
        return self.base_bytes + self.change_bytes

    @property
    def files(self) -> int:
        return self.base_files + self.change_files

    @property
    def avg_file_size(self) -> int:
        return self.bytes // self.files if self.files else 0


def _snapshot_id(store: Any) -> int | None:
    snap = store.current_snapshot() if store is not None else None
    return snap.snapshot_id if snap is not None else None


def health_settings(table: ArcticTable) -> HealthSettings:
    s = table.settings
    return HealthSettings(
        s.minor_trigger_file_count, s.major_trigger_duplicate_ratio, s.major_trigger_delete_ratio
    )


def measure_table(table: ArcticTable) -> TableFacts:
    """Compute a table's facts from its metadata (manifests are read once, then cached by scan.py)."""
    settings = Settings.of(table)
    snap = process.gather(table)
    base_live = live_files(table.base, table.base.current_snapshot(), Store.BASE)
    change_live = (
        live_files(table.change, table.change.current_snapshot(), Store.CHANGE)
        if table.change is not None
        else []
    )
    metrics = [
        evaluator.measure(p, snap.base.get(p, []), snap.change.get(p, []), settings) for p in snap.partitions
    ]
    nodes = len(metrics) * settings.base_buckets  # a merged partition keeps one file per base node
    measure = TableMeasure(
        files=sum(len(snap.base.get(p, [])) + len(snap.change.get(p, [])) for p in snap.partitions),
        small_files=sum(m.small_files for m in metrics),
        nodes=nodes,
        partitions=len(metrics),
        base_rows=sum(m.base_rows for m in metrics),
        change_rows=sum(m.upserted_rows + m.deleted_rows for m in metrics),
        delete_rows=sum(m.deleted_rows for m in metrics),
        upsert_rows=sum(m.upserted_rows for m in metrics),
    )
    history = versions.history(table.base, table.change)
    oldest = [h.oldest_change_ms for h in snap.histories.values() if h.oldest_change_ms is not None]
    facts = TableFacts(
        name=str(table.identifier),
        kind=KIND_KEYED if table.is_keyed else KIND_APPEND,
        root=state.table_root(table),
        base_snapshot_id=snap.base_snapshot_id,
        change_snapshot_id=snap.change_snapshot_id,
        records=measure.base_rows + measure.change_rows,
        base_files=len(base_live),
        change_files=len(change_live),
        base_bytes=sum(f.file_size for f in base_live),
        change_bytes=sum(f.file_size for f in change_live),
        unmerged_change_files=sum(m.change_files for m in metrics),
        unmerged_change_rows=measure.change_rows,
        oldest_unmerged_change_ms=min(oldest, default=None),
        last_commit_at_ms=history.commits[-1].committed_at_ms if history.commits else None,
        latest_version=history.latest,
        partitions=len(metrics),
        group=table.settings.group,
        quota=table.settings.quota,
        health=health_score(measure, health_settings(table)),
        pending_modes=(),
        pending_reasons=(),
        evaluated_ms=0,
        size_points=(*_size_points(table.base, 0), *_size_points(table.change, 1)),
        hive_version=_hive_version(table),
    )
    return with_pending(table, facts, snap)


def _hive_version(table: ArcticTable) -> int | None:
    if not table.settings.hive_compatible:
        return None
    synced = hive_syncs.latest(table)
    return synced.version if synced is not None else None


def _size_points(store: Any, kind: int) -> tuple[tuple[int, int, int, int], ...]:
    """Each retained snapshot's totals as its summary states them (pyiceberg writes them on every commit)."""
    if store is None:
        return ()
    points = []
    for snap in versions.snapshots_in_order(store):
        summary = versions.summary_of(snap)
        if "total-files-size" in summary:
            files = int(summary.get("total-data-files", 0)) + int(summary.get("total-delete-files", 0))
            points.append((snap.timestamp_ms, kind, int(summary["total-files-size"]), files))
    return tuple(points)


def with_pending(table: ArcticTable, facts: TableFacts, snap: process.Snapshot | None = None) -> TableFacts:
    """``facts`` with what the optimizer's triggers say now (the interval triggers depend on the clock)."""
    now = state.now_ms()
    if not table.settings.enabled:
        return replace(
            facts, pending_modes=(), pending_reasons=("self-optimizing.enabled is false",), evaluated_ms=now
        )
    snap = snap or process.gather(table)
    inputs = process.decide(table, snap, process.AUTO, Settings.of(table), now)
    return replace(
        facts,
        pending_modes=tuple(p.mode for p in inputs),
        pending_reasons=tuple(f"{p.partition or '(table)'}: {p.reason}" for p in inputs),
        evaluated_ms=now,
    )


@dataclass
class _Entry:
    key: tuple[Any, ...]
    facts: TableFacts
    table: ArcticTable | None = None  # kept to re-evaluate pending without reloading


@dataclass
class _Records:
    listing: tuple[tuple[str, int], ...] = ()
    records: list[state.ProcessRecord] = field(default_factory=list)


class FactsCache:
    """Facts of every table of a catalog, recomputed only for tables whose metadata moved."""

    def __init__(self, catalog: ArcticCatalog) -> None:
        self.catalog = catalog
        self._entries: dict[str, _Entry] = {}
        self._records: dict[str, _Records] = {}
        self._lock = threading.Lock()
        self.computed = 0  # how many times facts were computed (the benchmark and tests read it)

    # tables ------------------------------------------------------------------------------------
    def all(self) -> list[TableFacts]:
        """Facts of every readable table, by name; a table that fails to load is logged and left out."""
        found = []
        for name, key in self._keys():
            try:
                found.append(self._facts(name, key))
            except Exception as e:  # noqa: BLE001 - dropped while we listed, or unreadable: list the rest
                log.warning("%s: cannot read its metadata: %s", name, str(e).splitlines()[0] if str(e) else e)
        return sorted(found, key=lambda f: f.name)

    def get(self, identifier: TableIdentifier) -> tuple[ArcticTable, TableFacts]:
        """A table (loaded now) and its facts; raises NoSuchTableError as the catalog does."""
        table = self.catalog.load_table(identifier)
        key = (table.base.metadata_location, table.change.metadata_location if table.change else None)
        return table, self._facts(str(identifier), key, table)

    def _keys(self) -> Iterator[tuple[str, tuple[Any, ...] | None]]:
        locations = _sql_locations(self.catalog)
        if locations is not None:
            for (database, name), location in sorted(locations.items()):
                if not name.endswith((CHANGE_SUFFIX, STAGED_SUFFIX)):
                    yield f"{database}.{name}", (location, locations.get((database, name + CHANGE_SUFFIX)))
            return
        for database in self.catalog.list_databases():
            for name in self.catalog.list_tables(database):
                yield f"{database}.{name}", None

    def _facts(self, name: str, key: tuple[Any, ...] | None, table: ArcticTable | None = None) -> TableFacts:
        entry = self._entries.get(name)
        if key is None or (entry is None or entry.key != key):
            if table is None:
                table = self.catalog.load_table(TableIdentifier(*name.split(".", 1)))
            key = key or (
                table.base.metadata_location,
                table.change.metadata_location if table.change else None,
            )
        if entry is None or entry.key != key:
            assert table is not None
            entry = _Entry(key, measure_table(table), table)
            self.computed += 1
            with self._lock:
                self._entries[name] = entry
        elif state.now_ms() - entry.facts.evaluated_ms > PENDING_REFRESH_MS and entry.table is not None:
            entry.facts = with_pending(entry.table, entry.facts)
        return entry.facts

    def forget(self, name: str) -> None:
        """Drop what is cached of a table (after the service itself changed it)."""
        with self._lock:
            self._entries.pop(name, None)

    # optimizing processes -----------------------------------------------------------------------
    def processes(self, facts: TableFacts) -> list[state.ProcessRecord]:
        """The table's optimizing process records, parsed again only when its folder changed."""
        folder = f"{facts.root}/optimizing"
        fs, path = storage.filesystem(folder)
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        listing = tuple(sorted((i.base_name, i.mtime_ns or 0) for i in infos if i.type == pafs.FileType.File))
        cached = self._records.get(facts.name)
        if cached is None or cached.listing != listing:
            entry = self._entries.get(facts.name)
            table = (
                entry.table
                if entry is not None and entry.table is not None
                else self.catalog.load_table(TableIdentifier(*facts.name.split(".", 1)))
            )
            cached = _Records(listing, state.processes(table, strict=False))  # shown only
            self._records[facts.name] = cached
        return cached.records


def optimizing_status(facts: TableFacts, records: list[state.ProcessRecord]) -> str:
    """idle, pending, minor, major, full or committing (Amoro's statuses, planning aside), and failed
    while the last optimize failed and none has succeeded since (:func:`last_failure`)."""
    running = [r for r in records if r.is_running]
    if running:
        current = running[-1]
        return "committing" if current.status == state.COMMITTING else current.mode
    if last_failure(records) is not None:
        return "failed"
    return "pending" if facts.pending_modes else "idle"


_DECISIVE = frozenset({state.SUCCESS, state.PARTIAL, state.FAILED, state.ABANDONED})


def last_failure(records: list[state.ProcessRecord]) -> state.ProcessRecord | None:
    """The newest process that failed (or died), unless a later one committed. Processes that were
    dropped (their inputs moved) or cancelled neither clear nor make a failure."""
    for r in reversed(records):  # oldest first: process ids sort by start time
        status = r.effective_status
        if status in _DECISIVE:
            return r if status in (state.FAILED, state.ABANDONED) else None
    return None


def current_health(facts: TableFacts, records: list[state.ProcessRecord]) -> HealthScore:
    """The table's health: its files' score, less the penalty while its last optimize failed."""
    failure = last_failure(records)
    if failure is None:
        return facts.health
    reason = failure.failure_reason or (
        "its process stopped heart-beating"
        if failure.effective_status == state.ABANDONED
        else "no reason recorded"
    )
    return facts.health.with_penalty(
        Penalty(
            "optimize_failed",
            FAILED_OPTIMIZE_PENALTY,
            f"the last optimize (process {failure.process_id}) failed: {reason}; the table keeps its small files and "
            "change data until an optimize succeeds",
        )
    )


def last_optimized_ms(records: list[state.ProcessRecord]) -> int | None:
    """When the last optimize that committed anything ended; ``None`` if none did."""
    return optimizer_service.last_optimized_ms(records) or None


def _sql_locations(catalog: ArcticCatalog) -> dict[tuple[str, str], str | None] | None:
    """Every store's metadata location in one query, on a pyiceberg SQL catalog; ``None`` elsewhere."""
    try:
        from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
        from sqlalchemy import select
        from sqlalchemy.orm import Session
    except ImportError:
        return None
    iceberg = catalog.iceberg
    if not isinstance(iceberg, SqlCatalog):
        return None
    stmt = select(
        IcebergTables.table_namespace, IcebergTables.table_name, IcebergTables.metadata_location
    ).where(IcebergTables.catalog_name == iceberg.name)
    with Session(iceberg.engine) as session:
        return {(ns, name): location for ns, name, location in session.execute(stmt)}
