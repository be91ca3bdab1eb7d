"""Metadata tables: ``db.t.history``, ``db.t.snapshots``, ``db.t.files``, ``db.t.partitions``,
``db.t.optimizing``, ``db.t.consumers``."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from arctic_sql.table.catalog import ArcticTable
from arctic_sql.table.format import versions
from arctic_sql.table.scan import live_files, plan_read

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext


def _ts(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def _count(summary: dict[str, str], key: str) -> int:
    return int(summary.get(key, 0) or 0)


def history(ctx: StatementContext, table: ArcticTable) -> DataFrame:
    """One row per data commit (a version), oldest first."""
    rows = []
    for c in versions.data_commits(table.base, table.change):
        s = c.summary
        if c.store == "change":
            added_rows, removed_rows = _count(s, versions.UPSERTED_ROWS), _count(s, versions.DELETED_ROWS)
        else:
            added_rows, removed_rows = _count(s, "added-records"), _count(s, "deleted-records")
        rows.append((c.version, _ts(c.committed_at_ms), c.operation, c.store, c.snapshot_id, added_rows,
                     removed_rows, _count(s, "added-data-files"), _count(s, "deleted-data-files")))
    return ctx.result(rows, "version long, committed_at timestamp, operation string, store string, "
                                "snapshot_id long, rows_added long, rows_removed long, files_added long, "
                                "files_removed long")


def snapshots(ctx: StatementContext, table: ArcticTable) -> DataFrame:
    """Every retained Iceberg snapshot of both stores, optimizing and reservations included."""
    rows = []
    stores = [("base", table.base)] + ([("change", table.change)] if table.change is not None else [])
    for store_name, store in stores:
        for snap in versions.snapshots_in_order(store):
            summary = versions.summary_of(snap)
            rows.append((store_name, snap.snapshot_id, snap.parent_snapshot_id, snap.sequence_number,
                         _ts(snap.timestamp_ms), versions.operation_of(snap), summary))
    return ctx.result(rows, "store string, snapshot_id long, parent_id long, sequence_number long, "
                                "committed_at timestamp, operation string, summary map<string,string>")


def _key_range(table: ArcticTable, data_file) -> tuple[str | None, str | None]:
    from pyiceberg.conversions import from_bytes

    keys = table.schema.identifier_field_ids
    if not keys:
        return None, None
    lows, highs = data_file.lower_bounds or {}, data_file.upper_bounds or {}
    parts_low, parts_high = [], []
    for fid in keys:
        field_type = table.schema.find_field(fid).field_type
        parts_low.append(str(from_bytes(field_type, lows[fid])) if fid in lows else "?")
        parts_high.append(str(from_bytes(field_type, highs[fid])) if fid in highs else "?")
    return ", ".join(parts_low), ", ".join(parts_high)


def files(ctx: StatementContext, table: ArcticTable) -> DataFrame:
    """The live files of the latest version: store, node, kind, sequence, size, rows, key range."""
    plan = plan_read(table)
    rows = []
    # Change files already merged (at or below the watermark) are live but not read: show them too.
    change_files = live_files(table.change, table.change.current_snapshot(), "change") if table.change else []
    read = {f.path for f in plan.change_files}
    for f in list(plan.base_files) + change_files:
        low, high = _key_range(table, f.data_file)
        kind = "base" if f.store == "base" else ("delete" if f.is_delete else "upsert")
        merged = f.store == "change" and f.path not in read
        rows.append((f.store, f.partition, f.node_id, kind, f.sequence_number, f.path, f.file_size,
                     f.record_count, low, high, merged))
    return ctx.result(rows, "store string, partition string, node long, kind string, sequence_number long, "
                                "path string, size_bytes long, rows long, key_min string, key_max string, "
                                "merged boolean")


def partitions(ctx: StatementContext, table: ArcticTable) -> DataFrame:
    """Per partition: files and rows in each store, and the watermark."""
    plan = plan_read(table)
    stats: dict[str, list[int]] = {}
    for f in plan.base_files:
        s = stats.setdefault(f.partition, [0, 0, 0, 0])
        s[0] += 1
        s[1] += f.record_count
    for f in plan.change_files:
        s = stats.setdefault(f.partition, [0, 0, 0, 0])
        s[2] += 1
        s[3] += f.record_count
    rows = [(p, s[0], s[1], s[2], s[3], plan.watermarks.get(p, 0)) for p, s in sorted(stats.items())]
    return ctx.result(rows, "partition string, base_files long, base_rows long, change_files long, "
                                "change_rows long, watermark long")


def optimizing(ctx: StatementContext, table: ArcticTable) -> DataFrame:
    """One row per optimizing process (manual or by the service), oldest first."""
    from arctic_sql.table import optimizing_state as state

    rows = [
        (r.process_id, r.mode, r.effective_status, r.trigger, _ts(r.started_at_ms),
         _ts(r.ended_at_ms) if r.ended_at_ms else None,
         (r.ended_at_ms or r.heartbeat_ms) - r.started_at_ms, ",".join(r.partitions), r.input_files, r.input_bytes,
         r.output_files, r.output_bytes, r.task_time_ms, r.retries, r.failure_reason)
        for r in state.processes(table)
    ]
    return ctx.result(rows, "process_id string, mode string, status string, trigger string, "
                                "started_at timestamp, ended_at timestamp, duration_ms long, partitions string, "
                                "input_files long, input_bytes long, output_files long, output_bytes long, "
                                "task_time_ms long, retries long, failure_reason string")


def consumers(ctx: StatementContext, table: ArcticTable) -> DataFrame:
    """One row per stream consumer (``consumerId``): how far it has read and whether it still holds
    history back from expiration."""
    from arctic_sql.table import consumers as registry

    minutes = table.settings.consumer_expiration_time
    rows = [(c.consumer_id, c.version, _ts(c.updated_ms), c.live(minutes)) for c in registry.consumers(table)]
    return ctx.result(rows, "consumer_id string, version long, updated_at timestamp, live boolean")


_TABLES = {"history": history, "snapshots": snapshots, "files": files, "partitions": partitions,
           "optimizing": optimizing, "consumers": consumers}


def metadata_table(ctx: StatementContext, table: ArcticTable, name: str) -> DataFrame:
    return _TABLES[name](ctx, table)
