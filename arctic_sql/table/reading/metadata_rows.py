"""The rows of the metadata tables (``db.t.history|snapshots|files|partitions|optimizing``) as plain
dicts, from Iceberg metadata alone (no Spark, no SQL).

Two front ends show them: the SQL metadata tables (statements/metadata_tables.py turns the dicts into
DataFrames) and the management service's REST API (JSON). Times are epoch milliseconds (``*_ms``);
each front end renders them its own way.

>>> history(table)[0]  # doctest: +SKIP
{'version': 1, 'committed_at_ms': 1700000000000, 'operation': 'insert', 'store': 'change', ...}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from arctic_sql.table.format import versions
from arctic_sql.table.format.clustering import Clustering
from arctic_sql.table.format.layout import Store
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading import branches, tags
from arctic_sql.table.reading.scan import FileEntry, live_entries, live_files, plan_read
from arctic_sql.table.records import consumers as table_consumers
from arctic_sql.table.records import optimizing_processes as state

Row = dict[str, Any]


def _count(summary: dict[str, str], key: str) -> int:
    return int(summary.get(key, 0) or 0)


def history(table: ArcticTable) -> list[Row]:
    """One row per data commit (a version), oldest first."""
    rows = []
    for c in versions.data_commits(table.base, table.change):
        s = c.summary
        if c.store == Store.CHANGE:
            added_rows, removed_rows = _count(s, versions.UPSERTED_ROWS), _count(s, versions.DELETED_ROWS)
        else:
            added_rows, removed_rows = _count(s, "added-records"), _count(s, "deleted-records")
        rows.append(
            {
                "version": c.version,
                "committed_at_ms": c.committed_at_ms,
                "operation": c.operation,
                "store": str(c.store),
                "snapshot_id": c.snapshot_id,
                "rows_added": added_rows,
                "rows_removed": removed_rows,
                "files_added": _count(s, "added-data-files"),
                "files_removed": _count(s, "deleted-data-files"),
            }
        )
    return rows


def snapshots(table: ArcticTable) -> list[Row]:
    """Every retained Iceberg snapshot of both stores, optimizing and reservations included."""
    rows = []
    for store_name, store in stores(table):
        for snap in versions.snapshots_in_order(store):
            rows.append(
                {
                    "store": str(store_name),
                    "snapshot_id": snap.snapshot_id,
                    "parent_id": snap.parent_snapshot_id,
                    "sequence_number": snap.sequence_number,
                    "committed_at_ms": snap.timestamp_ms,
                    "operation": versions.operation_of(snap),
                    "summary": versions.summary_of(snap),
                }
            )
    return rows


def stores(table: ArcticTable) -> list[tuple[Store, Any]]:
    """(name, Iceberg table) of each store the table has: base, then change."""
    return [(Store.BASE, table.base)] + ([(Store.CHANGE, table.change)] if table.change is not None else [])


def key_range(table: ArcticTable, data_file: Any) -> tuple[str | None, str | None]:
    """The smallest and largest primary key a file holds, as text (``None`` without a key)."""
    return column_range(table, data_file, table.schema.identifier_field_ids)


def cluster_range(table: ArcticTable, data_file: Any) -> tuple[str | None, str | None]:
    """The bounds of the clustering columns in a file, as text (``None`` when the table has no
    clustering): what a filter on them is compared with to skip the file."""
    order = Clustering.of(table.properties, table.schema)
    if order is None:
        return None, None
    return column_range(
        table, data_file, [table.schema.find_field(c).field_id for c in order.columns], readable=True
    )


def column_range(
    table: ArcticTable, data_file: Any, keys: Sequence[int], *, readable: bool = False
) -> tuple[str | None, str | None]:
    """The lower and upper bounds of columns ``keys`` (field ids) in a file, each joined by ", "
    ("?" for a column without bounds); ``None`` for no columns. ``readable``: dates and timestamps
    as ISO text (key_min and key_max keep Iceberg's numbers, as they always showed them)."""
    from pyiceberg.conversions import from_bytes
    from pyiceberg.types import PrimitiveType

    if not keys:
        return None, None
    lows, highs = data_file.lower_bounds or {}, data_file.upper_bounds or {}
    parts_low: list[str] = []
    parts_high: list[str] = []
    for fid in keys:
        field_type = cast(PrimitiveType, table.schema.find_field(fid).field_type)  # a key column's
        for bounds, parts in ((lows, parts_low), (highs, parts_high)):
            value = from_bytes(field_type, bounds[fid]) if fid in bounds else None
            parts.append("?" if value is None else _text(field_type, value) if readable else str(value))
    return ", ".join(parts_low), ", ".join(parts_high)


def _text(field_type: Any, value: object) -> str:
    from pyiceberg.types import DateType, TimestampType, TimestamptzType
    from pyiceberg.utils.datetime import days_to_date, micros_to_timestamp, micros_to_timestamptz

    if isinstance(field_type, DateType) and isinstance(value, int):
        return days_to_date(value).isoformat()
    if isinstance(field_type, TimestampType) and isinstance(value, int):
        return micros_to_timestamp(value).isoformat(sep=" ")
    if isinstance(field_type, TimestamptzType) and isinstance(value, int):
        return micros_to_timestamptz(value).isoformat(sep=" ")
    return str(value)


def file_kind(f: FileEntry) -> str:
    """``base``, ``upsert`` or ``delete``: what a file holds."""
    return str(Store.BASE) if f.store == Store.BASE else ("delete" if f.is_delete else "upsert")


def files(table: ArcticTable) -> list[Row]:
    """The live files of the latest version: store, node, kind, sequence, size, rows, key range.

    Change files already merged (at or below the watermark) are live but not read: they show with
    ``merged`` true. A base file's position-delete files follow it, of kind ``position-delete``:
    their rows are the base rows they delete, their key range that of the file they name.
    """
    plan = plan_read(table)
    change_files = (
        live_files(table.change, table.change.current_snapshot(), Store.CHANGE) if table.change else []
    )
    read = {f.path for f in plan.change_files}
    delete_sequence = {
        f.path: f.sequence_number
        for f in live_entries(table.base, table.base.current_snapshot(), Store.BASE)
        if f.is_position_deletes
    }
    rows = []
    for f in list(plan.base_files) + change_files:
        low, high = key_range(table, f.data_file)
        rows.append(
            {
                "store": str(f.store),
                "partition": f.partition,
                "node": f.node_id,
                "kind": file_kind(f),
                "sequence_number": f.sequence_number,
                "path": f.path,
                "size_bytes": f.file_size,
                "rows": f.record_count,
                "key_min": low,
                "key_max": high,
                "merged": f.store == Store.CHANGE and f.path not in read,
                **dict(zip(("cluster_min", "cluster_max"), cluster_range(table, f.data_file), strict=True)),
            }
        )
        for d in f.deletes:
            rows.append(
                {
                    **rows[-1],
                    "kind": POSITION_DELETE,
                    "path": d.file_path,
                    "size_bytes": d.file_size_in_bytes,
                    "rows": d.record_count,
                    "sequence_number": delete_sequence.get(d.file_path),
                    "merged": False,
                }
            )
    return rows


POSITION_DELETE = "position-delete"


def partitions(table: ArcticTable) -> list[Row]:
    """Per partition: files and rows in each store (change data above the watermark), and the watermark."""
    plan = plan_read(table)
    stats: dict[str, list[int]] = {}
    for f in plan.base_files:
        s = stats.setdefault(f.partition, [0, 0, 0, 0])
        s[0] += 1
        s[1] += f.record_count - f.deleted_rows
    for f in plan.change_files:
        s = stats.setdefault(f.partition, [0, 0, 0, 0])
        s[2] += 1
        s[3] += f.record_count
    return [
        {
            "partition": p,
            "base_files": s[0],
            "base_rows": s[1],
            "change_files": s[2],
            "change_rows": s[3],
            "watermark": plan.watermarks.get(p, 0),
        }
        for p, s in sorted(stats.items())
    ]


def optimizing(table: ArcticTable) -> list[Row]:
    """One row per optimizing process (manual or by the service), oldest first."""
    return [
        {
            "process_id": r.process_id,
            "mode": r.mode,
            "status": str(r.effective_status),
            "trigger": r.trigger,
            "started_at_ms": r.started_at_ms,
            "ended_at_ms": r.ended_at_ms,
            "duration_ms": (r.ended_at_ms or r.heartbeat_ms) - r.started_at_ms,
            "partitions": list(r.partitions),
            "input_files": r.input_files,
            "input_bytes": r.input_bytes,
            "output_files": r.output_files,
            "output_bytes": r.output_bytes,
            "task_time_ms": r.task_time_ms,
            "retries": r.retries,
            "failure_reason": r.failure_reason,
        }
        for r in state.processes(table)
    ]


def consumers(table: ArcticTable) -> list[Row]:
    """One row per stream consumer (``consumerId``): how far it has read, and whether it still holds
    history back from expiration (``consumer.expiration-time``)."""
    minutes = table.settings.consumer_expiration_time
    return [
        {
            "consumer_id": c.consumer_id,
            "version": c.version,
            "updated_at_ms": c.updated_ms,
            "live": c.live(minutes),
        }
        for c in table_consumers.consumers(table)
    ]


def refs(table: ArcticTable) -> list[Row]:
    """The table's named versions: ``main`` (the newest version), its branches (the version each
    branch's head reads) and its tags, with the version each names and until when a tag keeps it."""
    latest = versions.history(table.base, table.change).latest
    rows: list[Row] = [
        {
            "name": tags.MAIN,
            "type": "BRANCH",
            "version": latest,
            "created_at_ms": None,
            "retained_until_ms": None,
        }
    ]
    rows += [
        {
            "name": b.name,
            "type": "BRANCH",
            "version": branches.head_version(table, b.name),
            "created_at_ms": None,
            "retained_until_ms": None,
        }
        for b in branches.branches(table)
    ]
    now = tags.now_ms()
    return rows + [
        {
            "name": t.name,
            "type": "TAG",
            "version": t.version,
            "created_at_ms": t.created_at_ms,
            "retained_until_ms": t.retain_until_ms,
        }
        for t in tags.tags(table)
        if t.live(now)
    ]
