"""The background optimizer's loop (its command line, ``arctic-sql optimizer``, is
``arctic_sql/frontends/optimizer_command.py``).

A long-running process that keeps the tables of one optimizer group optimized (DESIGN "The service"):
every ``--interval`` seconds it lists the catalog's tables, skips those whose snapshots did not move
since they were last found idle, evaluates the triggers of the rest (metadata only), and optimizes the
pending ones one at a time in the order of the scheduling policy:

- ``quota`` (default, as Amoro): a table may use up to ``self-optimizing.quota`` of the group's cores
  (``ceil(quota x cores)``, or a thread count when the quota is above 1); the table furthest below its
  quota goes first, occupation = task time in the last hour / 1 hour / quota threads.
- ``balanced``: the table optimized longest ago goes first.

One table's failure is logged, recorded in its ``db.t.optimizing`` and does not stop the others; a
failed table is tried again on a later round. A crash at any point leaves only unreferenced files.
Where ``table-expire.enabled`` (and ``clean-orphan-file.enabled``) are set, the service also runs
snapshot expiration with the change-data TTL (hourly) and orphan cleaning (daily), as Amoro's AMS.
Given a ``refresh`` callable, it refreshes the materialized views whose ``refresh.interval`` has
passed since their last refresh and whose sources moved (view_refresh.py).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arctic_sql.optimizer import process, view_refresh
from arctic_sql.optimizer.inputs import Settings
from arctic_sql.table.maintenance import actions, hive_sync
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.reading import branches
from arctic_sql.table.records import optimizing_processes as state

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arctic_sql.table.catalog import ArcticCatalog
    from arctic_sql.table.model.table import ArcticTable

log = logging.getLogger("arctic_sql.optimizer")

HOUR_MS = 3_600_000
REFRESH_MS = 60_000  # re-evaluate an unchanged table this often (interval triggers are time-based)
MAINTENANCE_INTERVALS_MS = {"expire": HOUR_MS, "orphans": 24 * HOUR_MS}  # Amoro's process-factories defaults


@dataclass
class TableState:
    """What the service remembers of a table between rounds."""

    snapshots: tuple[int | None, int | None] = (None, None)
    evaluated_ms: int = 0
    idle: bool = False


def quota_threads(quota: float, cores: int) -> int:
    """Amoro: a quota above 1 is a thread count; at most 1 is a share of the group's threads."""
    return int(quota) if quota > 1 else max(1, math.ceil(quota * cores))


def occupation(records: list[state.ProcessRecord], threads: int, now_ms: int) -> float:
    """Task time spent in the last hour / one hour / the table's quota threads (Amoro's quota occupation).

    A process's task time is spread evenly over its run; only the part inside the last hour counts.
    """
    spent = 0.0
    since = now_ms - HOUR_MS
    for r in records:
        end = r.ended_at_ms or r.heartbeat_ms
        if end <= since or not r.task_time_ms:
            continue
        span = max(1, end - r.started_at_ms)
        spent += r.task_time_ms * (end - max(r.started_at_ms, since)) / span
    return spent / HOUR_MS / threads


def last_optimized_ms(records: list[state.ProcessRecord]) -> int:
    ended = [r.ended_at_ms for r in records if r.status in (state.SUCCESS, state.PARTIAL) and r.ended_at_ms]
    return max(ended, default=0)


class Service:
    def __init__(
        self,
        spark: SparkSession,
        catalog: ArcticCatalog,
        group: str = "default",
        policy: str = "quota",
        cores: int | None = None,
        maintenance_intervals_ms: dict[str, int] | None = None,
        refresh: Callable[[TableIdentifier], None] | None = None,
        clock: Callable[[], int] = state.now_ms,
    ) -> None:
        """``refresh``: runs REFRESH MATERIALIZED VIEW (a statement, above this layer; without it
        views are not refreshed); ``clock``: the time in ms that ``refresh.interval`` is measured by."""
        self.spark, self.catalog = spark, catalog
        # How often expiration and orphan cleaning run per table (a benchmark at compressed time scales them).
        self.maintenance_intervals_ms = {**MAINTENANCE_INTERVALS_MS, **(maintenance_intervals_ms or {})}
        self.group = group
        self.policy = policy
        self.cores = cores or spark.sparkContext.defaultParallelism
        self.tables: dict[str, TableState] = {}
        self.maintained_ms: dict[tuple[str, str], int] = {}  # (table, job) -> when it last ran
        self.stopping = threading.Event()
        self.refresh, self.clock = refresh, clock

    # one round -----------------------------------------------------------------------------------
    def run_once(self) -> int:
        """One round over the group's tables; returns how many tables were optimized."""
        pending = []
        for table in self._group_tables():
            try:
                if self._pending(table):
                    pending.append(table)
            except Exception as e:  # noqa: BLE001 - one table's trouble must not stop the others
                log.error("%s: evaluation failed: %s", table.identifier, _one_line(e))
        optimized = 0
        for table in self._schedule(pending):
            if self.stopping.is_set():
                break
            optimized += self._optimize(table)
        for table in self._group_tables():
            if table.identifier.branch is None:  # expiration and orphan removal take the whole table
                self._maintain(table)
                self._sync_hive(table)
                self._refresh_view(table)
        return optimized

    def _group_tables(self) -> list[ArcticTable]:
        catalog = self.catalog
        tables = []
        for database in catalog.list_databases():
            for name in catalog.list_tables(database):
                try:
                    table = catalog.load_table(TableIdentifier(database, name))
                except Exception as e:  # noqa: BLE001 - dropped while we listed, or unreadable
                    log.warning("%s.%s: cannot load: %s", database, name, _one_line(e))
                    continue
                if not table.settings.enabled:
                    continue
                if table.settings.group != self.group:
                    continue
                tables.append(table)
                # Each branch is optimized on its own line, as `main` is: its optimizing commits go to
                # its refs, so no branch's files are ever mixed into another's.
                tables.extend(branches.on_branch(table, b.name) for b in branches.branches(table))
        return tables

    def _pending(self, table: ArcticTable) -> bool:
        """Whether any partition of ``table`` has optimizing due; cheap when nothing moved."""
        key = str(table.identifier)
        remembered = self.tables.setdefault(key, TableState())
        snapshots = (
            _snapshot_id(table.base),
            _snapshot_id(table.change) if table.change is not None else None,
        )
        now = state.now_ms()
        if (
            remembered.idle
            and snapshots == remembered.snapshots
            and now - remembered.evaluated_ms < REFRESH_MS
        ):
            return False  # nothing committed since we found it idle
        snap = process.gather(table)
        inputs = process.decide(table, snap, process.AUTO, Settings.of(table), now)
        remembered.snapshots, remembered.evaluated_ms, remembered.idle = snapshots, now, not inputs
        for p in inputs:
            log.info(
                "%s: partition %s needs %s optimizing: %s", key, p.partition or "(table)", p.mode, p.reason
            )
        return bool(inputs)

    def _schedule(self, tables: list[ArcticTable]) -> list[ArcticTable]:
        now = state.now_ms()
        records = {str(t.identifier): state.processes(t, strict=False) for t in tables}  # an order only
        if self.policy == "balanced":
            order = sorted(
                tables, key=lambda t: (last_optimized_ms(records[str(t.identifier)]), str(t.identifier))
            )
        else:

            def occupied(t: ArcticTable) -> float:
                threads = quota_threads(t.settings.quota, self.cores)
                return occupation(records[str(t.identifier)], threads, now)

            order = sorted(tables, key=lambda t: (occupied(t), str(t.identifier)))
        if len(order) > 1:
            log.info("schedule (%s): %s", self.policy, ", ".join(str(t.identifier) for t in order))
        return order

    def _optimize(self, table: ArcticTable) -> int:
        budget = table.settings.max_input_bytes * self.cores
        try:
            results = process.optimize(
                self.spark, table, process.AUTO, trigger="service", budget_bytes=budget
            )
        except Exception as e:  # noqa: BLE001 - recorded in db.t.optimizing; retried next round
            log.error("%s: optimizing failed: %s", table.identifier, _one_line(e))
            return 0
        finally:
            self.tables.pop(str(table.identifier), None)  # re-evaluate next round
        for r in results:
            log.info(
                "%s: partition %s %s: %d files (%d bytes) -> %s files, %s in %d ms",
                table.identifier,
                r.partition or "(table)",
                r.mode,
                r.input_files_count,
                r.input_bytes,
                r.output_files_count,
                "committed" if r.committed else "dropped",
                r.duration_ms,
            )
        return int(any(r.committed for r in results))

    def _maintain(self, table: ArcticTable) -> None:
        """Expiration (with the change-data TTL) and orphan cleaning on schedule, where the table enables them."""

        now = state.now_ms()
        settings = table.settings
        jobs = (
            ("expire", settings.table_expire_enabled, actions.expire_snapshots),
            ("orphans", settings.clean_orphan_file_enabled, actions.remove_orphan_files),
        )
        for name, enabled, job in jobs:
            key = (str(table.identifier), name)
            if not enabled or now - self.maintained_ms.get(key, 0) < self.maintenance_intervals_ms[name]:
                continue
            self.maintained_ms[key] = now
            try:
                # The action records the run the management service shows; defaults from the table's properties.
                result = job(table, trigger="optimizer")
                log.info("%s: %s: %s", table.identifier, job.__name__, result)
            except Exception as e:  # noqa: BLE001 - logged; tried again next interval
                log.error("%s: %s failed: %s", table.identifier, job.__name__, _one_line(e))

    def _sync_hive(self, table: ArcticTable) -> None:
        """The Hive view's sync every ``hive.sync.interval`` minutes, when the table has moved past it."""
        interval = table.settings.hive_sync_interval
        if not table.settings.hive_compatible or interval <= 0:
            return
        try:
            if not hive_sync.due(table, interval, state.now_ms()):
                return
            result = hive_sync.sync(self.spark, table)
            log.info("%s: hive sync: %s", table.identifier, result)
        except Exception as e:  # noqa: BLE001 - logged; tried again next round
            log.error("%s: hive sync failed: %s", table.identifier, _one_line(e))

    def _refresh_view(self, table: ArcticTable) -> None:
        """A materialized view's refresh, when ``refresh.interval`` has passed and a source moved."""
        if self.refresh is None:
            return
        try:
            if view_refresh.due(self.catalog, table, self.clock()):
                self.refresh(table.identifier)
                log.info("%s: materialized view refreshed", table.identifier)
        except Exception as e:  # noqa: BLE001 - logged; tried again next round
            log.error("%s: materialized view refresh failed: %s", table.identifier, _one_line(e))

    # the loop ------------------------------------------------------------------------------------
    def run(self, interval_s: float) -> None:
        log.info(
            "optimizer for group '%s' started: policy %s, %d cores, every %.1f s",
            self.group,
            self.policy,
            self.cores,
            interval_s,
        )
        while not self.stopping.is_set():
            try:
                self.run_once()
            except Exception as e:  # noqa: BLE001 - a catalog hiccup; the next round tries again
                log.error("round failed: %s", _one_line(e))
            self.stopping.wait(interval_s)
        log.info("optimizer stopped")


def _snapshot_id(store) -> int | None:
    snap = store.current_snapshot()
    return snap.snapshot_id if snap else None


def _one_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
