"""One optimizing process of one table, end to end: gather, evaluate, plan, execute, commit, record.

Used by ``CALL system.optimize``, ``ALTER TABLE ... COMPACT`` and the background service alike, so
what an operator sees in ``db.t.optimizing`` is the same whoever started it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.expressions import BooleanExpression

from arctic_sql.errors import (
    ArcticError,
    CommitConflictError,
    InvalidArgumentError,
    failure_summary,
    full_message,
)
from arctic_sql.optimizer import cancellation, committer, evaluator, executor, planner
from arctic_sql.optimizer.inputs import PlanFile, Settings, plan_files
from arctic_sql.table.files import storage
from arctic_sql.table.format import versions
from arctic_sql.table.format.layout import Store
from arctic_sql.table.format.partitioning import partition_path
from arctic_sql.table.maintenance import hive_sync
from arctic_sql.table.model.results import output_schema
from arctic_sql.table.reading import pairs
from arctic_sql.table.reading.scan import live_files
from arctic_sql.table.records import optimizing_processes as state
from arctic_sql.table.writing import commit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arctic_sql.table.model.table import ArcticTable

log = logging.getLogger(__name__)

AUTO = "auto"
MODES = (*evaluator.MODES, AUTO)


@dataclass(frozen=True)
class PartitionResult:
    """What optimizing did to one partition: its fields are ``CALL system.optimize``'s output columns."""

    partition: str
    mode: str
    input_files_count: int
    input_bytes: int
    output_files_count: int | None  # None in a dry run and when nothing was due
    output_bytes: int | None
    duration_ms: int
    committed: bool


OUTPUT_SCHEMA = output_schema(PartitionResult)


@dataclass
class Snapshot:
    """A table's optimizing inputs at one moment: per partition its files above the watermark."""

    base_snapshot_id: int | None
    change_snapshot_id: int | None
    base: dict[str, list[PlanFile]]
    change: dict[str, list[PlanFile]]
    watermarks: dict[str, int]
    histories: dict[str, evaluator.History]

    @property
    def partitions(self) -> list[str]:
        return sorted(set(self.base) | set(self.change))


def gather(table: ArcticTable, partitions: BooleanExpression | None = None) -> Snapshot:
    """Read the current metadata of both stores (no data file is opened); ``partitions``: a filter on
    partition columns selecting the partitions to consider (None: all)."""
    pairs.reload(table)
    base_snap = table.base.current_snapshot()
    change_snap = table.change.current_snapshot() if table.change is not None else None
    marks = versions.watermarks_of(base_snap)
    base_entries = live_files(table.base, base_snap, Store.BASE)
    change_entries = [
        f
        for f in (live_files(table.change, change_snap, Store.CHANGE) if table.change is not None else [])
        if f.sequence_number > marks.get(f.partition, 0)
    ]
    selected = None
    if partitions is not None:
        selected = {
            task.file.file_path
            for store, snap in ((table.base, base_snap), (table.change, change_snap))
            if store is not None and snap is not None
            for task in store.scan(row_filter=partitions, snapshot_id=snap.snapshot_id).plan_files()
        }
        selected = {f.partition for f in [*base_entries, *change_entries] if f.path in selected}
    base: dict[str, list[PlanFile]] = defaultdict(list)
    change: dict[str, list[PlanFile]] = defaultdict(list)
    for f in plan_files(table, base_entries):
        if selected is None or f.partition in selected:
            base[f.partition].append(f)
    for f in plan_files(table, change_entries):
        if selected is None or f.partition in selected:
            change[f.partition].append(f)
    return Snapshot(
        base_snap.snapshot_id if base_snap else None,
        change_snap.snapshot_id if change_snap else None,
        dict(base),
        dict(change),
        marks,
        _histories(table, change),
    )


def _histories(table: ArcticTable, change: dict[str, list[PlanFile]]) -> dict[str, evaluator.History]:
    """Per partition: when each mode last ran (from optimize commits) and its oldest unmerged change."""
    last: dict[str, dict[str, int]] = defaultdict(dict)
    base_snaps = versions.snapshots_in_order(table.base)
    for snap in base_snaps:
        summary = versions.summary_of(snap)
        if versions.operation_of(snap) == versions.OPTIMIZE and committer.PARTITIONS in summary:
            for partition, mode in json.loads(summary[committer.PARTITIONS]).items():
                last[partition][mode] = snap.timestamp_ms
    committed_at = {}
    if table.change is not None:
        committed_at = {s.sequence_number: s.timestamp_ms for s in versions.snapshots_in_order(table.change)}
    created = base_snaps[0].timestamp_ms if base_snaps else None
    histories = {}
    for partition in set(last) | set(change):
        oldest = min(
            (
                at
                for f in change.get(partition, [])
                if (at := committed_at.get(f.sequence_number)) is not None
            ),
            default=None,
        )
        marks = last.get(partition, {})
        histories[partition] = evaluator.History(
            marks.get(evaluator.MINOR), marks.get(evaluator.MAJOR), marks.get(evaluator.FULL), oldest, created
        )
    return histories


def decide(
    table: ArcticTable, snap: Snapshot, mode: str, settings: Settings, now_ms: int | None = None
) -> list[planner.PartitionInput]:
    """Each partition's mode: the requested one, or for ``auto`` what the triggers say."""
    now_ms = now_ms if now_ms is not None else state.now_ms()
    inputs = []
    for partition in snap.partitions:
        base, change = snap.base.get(partition, []), snap.change.get(partition, [])
        if mode == AUTO:
            metrics = evaluator.measure(partition, base, change, settings)
            history = snap.histories.get(partition, evaluator.History(created_ms=None))
            decision = evaluator.evaluate(metrics, settings, history, now_ms)
            log.info(
                "evaluate %s partition %s: %s (%s)",
                table.identifier,
                partition or "(table)",
                decision.mode or "no optimizing",
                decision.reason,
            )
            if decision.mode is None:
                continue
            chosen, reason = decision.mode, decision.reason
        else:
            chosen, reason = mode, "requested"
        inputs.append(
            planner.PartitionInput(partition, chosen, reason, base, change, snap.watermarks.get(partition, 0))
        )
    return inputs


def optimize(
    spark: SparkSession,
    table: ArcticTable,
    mode: str = AUTO,
    partitions: BooleanExpression | None = None,
    dry_run: bool = False,
    trigger: str = "manual",
    budget_bytes: int | None = None,
    now_ms: int | None = None,
) -> list[PartitionResult]:
    """Optimize ``table`` once; return one result per partition planned (``budget_bytes``: input cap)."""
    mode = (mode or AUTO).lower()
    if mode not in MODES:
        raise InvalidArgumentError(f"Unknown optimizing mode '{mode}'; use one of {', '.join(MODES)}")
    settings = Settings.of(table)
    snap = gather(table, partitions)
    plan = planner.plan(decide(table, snap, mode, settings, now_ms), settings, budget_bytes)
    for skipped in plan.skipped:
        log.info(
            "optimize %s: partition %s left for the next run (input budget spent)",
            table.identifier,
            skipped or "(table)",
        )
    if dry_run or not plan.partitions:
        return [
            PartitionResult(p.partition, p.mode, p.input_files_count, p.input_bytes, None, None, 0, False)
            for p in plan.partitions
        ]
    process_mode = max((p.mode for p in plan.partitions), key=lambda m: evaluator.RANK[m])
    record = state.new_record(table, process_mode, trigger, snap.base_snapshot_id, snap.change_snapshot_id)
    record.partitions = [p.partition for p in plan.partitions]
    record.input_files = sum(p.input_files_count for p in plan.partitions)
    record.input_bytes = plan.input_bytes
    token = cancellation.register(record.process_id, spark, executor.job_group(record.output_prefix))
    try:
        state.save(table, record)
        results = _run(spark, table, plan, record, token)
    finally:
        cancellation.unregister(token)
    # Full and major optimizing rewrite partitions whole: the moment to refresh the Hive view.
    if table.settings.hive_compatible and any(
        r.committed and r.mode in (evaluator.FULL, evaluator.MAJOR) for r in results
    ):
        try:
            hive_sync.sync(spark, table)
        except CommitConflictError as e:  # another sync is bringing the view up; the optimize stands
            log.warning("%s", e)
    return results


def _run(
    spark: SparkSession,
    table: ArcticTable,
    plan: planner.Plan,
    record: state.ProcessRecord,
    token: cancellation.Token,
) -> list[PartitionResult]:
    started = time.monotonic()
    beat = _Heartbeat(table, record)
    tasks = [t for p in plan.partitions for t in p.tasks]
    retries = table.settings.execute_num_retries
    try:
        token.check()
        state.transition(table, record, state.EXECUTING)
        beat.start()
        execution = executor.run_tasks(
            spark, table, tasks, record.output_prefix, retries, token.cancelled.is_set
        )
        # Task time, as quota scheduling counts it: the run's time on the cores its tasks could use.
        record.task_time_ms = execution.duration_ms * min(len(tasks), spark.sparkContext.defaultParallelism)
        record.retries = execution.attempts - 1
        outputs: dict[str, list] = defaultdict(list)
        spec, schema = table.spec, table.schema
        for data_file in commit.data_files(table.base, execution.paths):
            outputs[partition_path(spec, schema, data_file.partition)].append(data_file)
        with beat.paused(), cancellation.committing(token):  # a cancel from here on is refused
            state.transition(table, record, state.COMMITTING)
        outcome = committer.commit_plan(table, plan.partitions, outputs, record.process_id, record.mode)
    except BaseException as e:
        beat.stop()
        if record.status in (state.PLANNED, state.EXECUTING):
            # Nothing was committed; once committing, commit_base cleans up itself (and must not
            # when the commit's state is unknown: the files may be referenced).
            # A task killed by a cancel may still write a file after this: it lies under the
            # output folder, referenced by nothing, and remove_orphan_files takes it.
            storage.delete_tree(record.output_prefix)
        if token.cancelled.is_set() and record.status in (state.PLANNED, state.EXECUTING):
            state.transition(table, record, state.CANCELLED, failure="cancelled on request before committing")
            log.warning(
                "optimize %s: process %s cancelled; nothing committed", table.identifier, record.process_id
            )
            raise cancellation.OptimizingCancelledError(
                f"Optimizing {table.identifier} (process {record.process_id}) was cancelled; nothing was committed"
            ) from e
        message = failure_summary(e)
        if record.status in state.ACTIVE:
            state.transition(table, record, state.FAILED, failure=message, detail=full_message(e))
        log.error("optimize %s failed: %s", table.identifier, message)
        if isinstance(e, ArcticError):
            raise
        raise ArcticError(f"Optimizing {table.identifier} failed: {message}") from e
    beat.stop()
    committed = set(outcome.committed)
    record.output_files = sum(len(outputs[p]) for p in committed)
    record.output_bytes = sum(f.file_size_in_bytes for p in committed for f in outputs[p])
    final = state.SUCCESS if not outcome.dropped else state.PARTIAL if committed else state.DROPPED
    reasons = "; ".join(f"{p or '(table)'}: {why}" for p, why in outcome.dropped.items())
    state.transition(table, record, final, failure=reasons or None)
    duration = int((time.monotonic() - started) * 1000)
    log.info(
        "optimize %s: %s %s, %d partition(s) committed, %d dropped, %d -> %d files in %d ms",
        table.identifier,
        record.mode,
        final,
        len(committed),
        len(outcome.dropped),
        record.input_files,
        record.output_files,
        duration,
    )
    return [
        PartitionResult(
            p.partition,
            p.mode,
            p.input_files_count,
            p.input_bytes,
            len(outputs[p.partition]),
            sum(f.file_size_in_bytes for f in outputs[p.partition]),
            duration,
            p.partition in committed,
        )
        for p in plan.partitions
    ]


class _Heartbeat:
    """Rewrites the process record every ``state.HEARTBEAT_MS`` while tasks run."""

    def __init__(self, table: ArcticTable, record: state.ProcessRecord) -> None:
        self.table, self.record = table, record
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="arctic-optimize-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(state.HEARTBEAT_MS / 1000):
            with self._lock:
                if self.record.status in state.ACTIVE:
                    state.heartbeat(self.table, self.record)

    def paused(self) -> threading.Lock:
        return self._lock

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
