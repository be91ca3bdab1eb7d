"""Spark jobs that write a table's Parquet files. They never commit: see commit.py.

A writer gets a DataFrame whose columns are the table's (plus ``arctic_op`` for change rows), lays
its rows out by partition, tree node and kind of change (format/layout.py), sorts each file by the
primary key, and returns the locations of the files it wrote, checked against the number of rows
its tasks report having written.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
from pyiceberg.schema import Schema

from arctic_sql.errors import ExecutionError
from arctic_sql.table.files import storage
from arctic_sql.table.format import layout
from arctic_sql.table.format.layout import Store
from arctic_sql.table.format.partitioning import helper_columns, helper_name
from arctic_sql.table.format.tree import node_id_column
from arctic_sql.table.model.schemas import spark_schema

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column, DataFrame

    from arctic_sql.table.model.table import ArcticTable

# Rows per file are capped from the target size and a conservative compressed row width, so that a
# large INSERT OVERWRITE yields several files per node rather than one huge one.
_ASSUMED_ROW_BYTES = 48


# Physical operators that adaptive execution runs as query stages to build a plan's RDD: shuffles and
# broadcasts (``Exchange``), cached frames (``InMemoryTableScan``) and subqueries.
_STAGES = ("Exchange", "InMemoryTableScan", "Subquery")


def one_partition(df: DataFrame) -> bool:
    """Whether ``df``'s rows are known to come in one partition without running anything.

    Under adaptive execution ``df.rdd`` is not planning only: building the RDD runs every query
    stage below the last (shuffles, broadcasts, caches), and the action that follows runs them
    again (a join view's refresh at 2M rows ran 16 jobs, 13 without it). So a plan with such
    a stage counts as many partitions (the callers' shuffle or coalesce then costs little at one);
    only a plan without any has its RDD built to count them."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    if any(word in plan for word in _STAGES):
        return False
    return df._jdf.rdd().getNumPartitions() <= 1


def max_rows_per_file(table: ArcticTable) -> int:
    target_size = table.settings.target_size
    return max(1, target_size // _ASSUMED_ROW_BYTES)


def align(df: DataFrame, schema: Schema, *, all_nullable: bool = False, what: str | None = None) -> DataFrame:
    """Cast ``df``'s columns (the table's, by name) to the table types, with Iceberg field ids attached.

    ``what`` (``INSERT into db.t``): fail the job at a NULL in a NOT NULL column, which Spark's writer
    lets through (it goes by the DataFrame's types). The error is arctic-sql's, on a line of its own
    as a worker's would be, where spark.translate finds it.
    """
    from pyspark.sql import functions as F

    target = spark_schema(schema, all_nullable=all_nullable)
    extra = [c for c in df.columns if c.startswith("arctic_")]
    columns = []
    for f, field in zip(target.fields, schema.fields, strict=True):
        column = F.col(f"`{f.name}`").cast(f.dataType)
        if what is not None and field.required:
            message = f"\narctic_sql.errors.InvalidArgumentError: {what} writes NULL into NOT NULL column '{f.name}'\n"
            column = F.when(column.isNull(), F.raise_error(F.lit(message))).otherwise(column)
        columns.append(column.alias(f.name, metadata=f.metadata))
    return df.select(*columns, *extra)


def laid_out(df: DataFrame, table: ArcticTable, store: str) -> tuple[DataFrame, list[str]]:
    """``df`` with the columns that become directories (partition values, tree node, kind of change)
    for ``store``, and their names in directory order."""
    partition_cols = helper_columns(table.spec, table.schema)
    directories = [helper_name(i) for i in range(len(partition_cols))]
    out = df.select("*", *partition_cols)
    keys = table.primary_key
    if keys:
        settings = table.settings
        buckets = (
            settings.base_file_index_hash_bucket
            if store == Store.BASE
            else settings.change_file_index_hash_bucket
        )
        out = out.withColumn(layout.NODE_COLUMN, node_id_column(keys, buckets, table.key_as_int))
        directories.append(layout.NODE_COLUMN)
    if store == Store.CHANGE:
        directories.append(layout.OP_COLUMN)
    else:
        out = out.drop(layout.OP_COLUMN) if layout.OP_COLUMN in out.columns else out
    return out, directories


def write_files(df: DataFrame, table: ArcticTable, *, store: str, location: str | None = None) -> list[str]:
    """Write ``df`` into ``store`` (``base`` or ``change``) of ``table``; return the new file locations.

    ``location`` is a new folder under the store's ``data/`` (default: a fresh one per write).
    """
    out, directories = laid_out(df, table, store)
    return write_laid_out(out, table, directories, store=store, location=location)


@dataclass(frozen=True)
class WriteOrder:
    """How rows are ordered within each directory of a write, instead of by key: ``columns`` to
    sort by, ``helpers`` among the rows' columns that only serve the sort (dropped before writing),
    ``block_bytes`` the Parquet row-group size (0: Spark's)."""

    columns: list[Column]
    helpers: list[str] = dataclass_field(default_factory=list)
    block_bytes: int = 0


def sorted_within(
    rows: DataFrame, directories: Sequence[str], keys: Sequence[str], order: WriteOrder | None
) -> DataFrame:
    """``rows`` sorted within each Spark partition by directory, then by ``order`` (default: by
    key), without ``order``'s helper columns, dropped after the sort (which a projection keeps)."""
    from pyspark.sql import functions as F

    within = order.columns if order is not None else [F.col(f"`{k}`") for k in keys]
    by = [*[F.col(f"`{d}`") for d in directories], *within]
    if by:
        rows = rows.sortWithinPartitions(*by)
    if order is not None and order.helpers:
        rows = rows.drop(*order.helpers)
    return rows


def write_laid_out(
    out: DataFrame,
    table: ArcticTable,
    directories: list[str],
    *,
    store: str,
    location: str | None = None,
    clustered: bool = False,
    order: WriteOrder | None = None,
) -> list[str]:
    """Write rows that carry their directory columns (see :func:`laid_out`).

    ``clustered``: each Spark partition already holds whole directories (the optimizer shuffles by
    them once for its merge), so no second shuffle is needed for one file per directory.
    ``order``: the order within a directory (default: by key).
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    target_store = table.base if store == Store.BASE else table.change
    assert target_store is not None
    location = location or layout.new_write_location(target_store.location())
    # Gather each directory's rows into one task, so it gets one file (or a few, at the size cap);
    # a single-partition input (VALUES, one small batch file) already is one task.
    if not clustered and directories and not one_partition(out):
        out = out.repartition(*[F.col(d) for d in directories])
    out = sorted_within(out, directories, table.primary_key, order)
    # The write's own tasks count the rows they hand the Parquet writer (an Observation: Spark's
    # accumulators, merged only from tasks that succeeded); the files found afterwards must hold
    # exactly that many, or a file went missing (or appeared) between writing and committing.
    written = Observation(f"arctic-write-{uuid.uuid4().hex}")
    out = out.observe(written, F.count(F.lit(1)).alias("rows"))
    writer = out.write.mode("errorifexists")
    # Files are sorted by key: row groups of a bounded row count let a keyed lookup read one group
    # of a large file, not the file (Spark's 128 MB row groups hold a 10M-row table's whole node).
    writer = writer.option("parquet.block.row.count.limit", table.settings.write_parquet_row_group_rows)
    if order is not None and order.block_bytes:
        writer = writer.option("parquet.block.size", order.block_bytes)
    (writer.option("maxRecordsPerFile", max_rows_per_file(table)).partitionBy(*directories).parquet(location))
    paths = storage.list_files(location)
    verify_rows(paths, int(written.get["rows"]), location)
    return paths


def verify_rows(paths: list[str], expected: int, location: str) -> None:
    """Raise (and drop the write's folder, which nothing references yet) unless ``paths`` hold ``expected`` rows."""
    found = sum(footer_rows(paths))
    if found != expected:
        storage.delete_tree(location)
        raise ExecutionError(
            f"The write to {location} produced {expected} rows but {len(paths)} file(s) holding "
            f"{found} were found after it; nothing was committed"
        )


def footer_rows(paths: list[str]) -> list[int]:
    """The row count in each Parquet file's footer (a missing file raises FileNotFoundError)."""

    def rows(path: str) -> int:
        fs, inner = storage.filesystem(path)
        with fs.open_input_file(inner) as f:
            return pq.ParquetFile(f).metadata.num_rows

    with ThreadPoolExecutor(max_workers=min(8, max(1, len(paths)))) as pool:
        return list(pool.map(rows, paths))
