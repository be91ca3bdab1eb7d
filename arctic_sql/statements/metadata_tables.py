"""Metadata tables: ``db.t.history``, ``db.t.snapshots``, ``db.t.files``, ``db.t.partitions``,
``db.t.optimizing``, ``db.t.consumers``, ``db.t.refs``. The rows come from table/reading/metadata_rows.py (shared with
the management service); here they become DataFrames with SQL types."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING

from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading import metadata_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext


def _ts(ms: int | None) -> datetime.datetime | None:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC) if ms is not None else None


# (rows, the row's keys in column order, the DataFrame schema); `*_ms` keys become timestamps.
_TABLES: dict[str, tuple[Callable[[ArcticTable], list[dict]], tuple[str, ...], str]] = {
    "history": (
        metadata_rows.history,
        (
            "version",
            "committed_at_ms",
            "operation",
            "store",
            "snapshot_id",
            "rows_added",
            "rows_removed",
            "files_added",
            "files_removed",
        ),
        (
            "version long, committed_at timestamp, operation string, store string, snapshot_id long, "
            "rows_added long, rows_removed long, files_added long, files_removed long"
        ),
    ),
    "snapshots": (
        metadata_rows.snapshots,
        ("store", "snapshot_id", "parent_id", "sequence_number", "committed_at_ms", "operation", "summary"),
        (
            "store string, snapshot_id long, parent_id long, sequence_number long, "
            "committed_at timestamp, operation string, summary map<string,string>"
        ),
    ),
    "files": (
        metadata_rows.files,
        (
            "store",
            "partition",
            "node",
            "kind",
            "sequence_number",
            "path",
            "size_bytes",
            "rows",
            "key_min",
            "key_max",
            "merged",
            "cluster_min",
            "cluster_max",
        ),
        (
            "store string, partition string, node long, kind string, sequence_number long, path string, "
            "size_bytes long, rows long, key_min string, key_max string, merged boolean, "
            "cluster_min string, cluster_max string"
        ),
    ),
    "partitions": (
        metadata_rows.partitions,
        ("partition", "base_files", "base_rows", "change_files", "change_rows", "watermark"),
        (
            "partition string, base_files long, base_rows long, change_files long, change_rows long, "
            "watermark long"
        ),
    ),
    "optimizing": (
        metadata_rows.optimizing,
        (
            "process_id",
            "mode",
            "status",
            "trigger",
            "started_at_ms",
            "ended_at_ms",
            "duration_ms",
            "partitions",
            "input_files",
            "input_bytes",
            "output_files",
            "output_bytes",
            "task_time_ms",
            "retries",
            "failure_reason",
        ),
        (
            "process_id string, mode string, status string, trigger string, started_at timestamp, "
            "ended_at timestamp, duration_ms long, partitions string, input_files long, input_bytes long, "
            "output_files long, output_bytes long, task_time_ms long, retries long, failure_reason string"
        ),
    ),
    "consumers": (
        metadata_rows.consumers,
        ("consumer_id", "version", "updated_at_ms", "live"),
        "consumer_id string, version long, updated_at timestamp, live boolean",
    ),
    "refs": (
        metadata_rows.refs,
        ("name", "type", "version", "created_at_ms", "retained_until_ms"),
        "name string, type string, version long, created_at timestamp, retained_until timestamp",
    ),
}


def _cell(key: str, value: object) -> object:
    if key.endswith(("_at_ms", "_until_ms")):
        return _ts(value)  # type: ignore[arg-type]
    if isinstance(value, list):
        return ",".join(value)
    return value


METADATA_TABLES = tuple(_TABLES)  # db.t.<name>


def metadata_table(ctx: StatementContext, table: ArcticTable, name: str) -> DataFrame:
    rows_of, keys, schema = _TABLES[name]
    rows = [tuple(_cell(k, row[k]) for k in keys) for row in rows_of(table)]
    return ctx.result(rows, schema)
