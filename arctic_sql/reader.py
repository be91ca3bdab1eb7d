"""Merge-on-read: a version of a table as one Spark DataFrame over its planned files.

The rule (DESIGN "Transactions and order"): for each key, the change with the highest transaction
above the partition's watermark wins over older changes and over the base; a winning delete removes
the key. The planner already dropped change files at or below the watermark, so here:

    changed = distinct keys of the change rows   (no order needed: any change overrides the base)
    latest  = newest change per key              (a window over the change rows only)
    result  = base LEFT ANTI JOIN changed        (the changed keys are broadcast: no base shuffle)
              UNION latest rows that are upserts

The base side is never shuffled while the change data is small (``merge-on-read.broadcast-
threshold-rows``); the benchmark ``benchmarks/merge_on_read.py`` keeps the measurement behind
this choice. Filters and projections of the query above push down through the union and the
anti-join into both Parquet scans (row-group skipping), which ``EXPLAIN`` shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arctic_sql import storage
from arctic_sql.scan import FileEntry, ReadPlan
from arctic_sql.types import spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from arctic_sql.catalog import ArcticTable

TXN = "_arctic_txn"
IS_DELETE = "_arctic_is_delete"
FILE = "_arctic_file"
RANK = "_arctic_rank"


def read_files(spark: SparkSession, plan_schema, files: tuple[FileEntry, ...], *, all_nullable: bool = False):
    schema = spark_schema(plan_schema, all_nullable=all_nullable)
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*[f.path for f in files])


def merged_dataframe(spark: SparkSession, table: ArcticTable, plan: ReadPlan) -> DataFrame:
    """The rows of ``plan``'s version of ``table``."""
    from pyspark.sql.functions import broadcast

    base = read_files(spark, plan.schema, plan.base_files)
    if table.change is None or not plan.change_files:
        return base
    keys = table.primary_key
    # Every key with a change above the watermark overrides the base, whatever that change is, so
    # the anti-join side needs only the distinct changed keys: no transaction order, no file tags.
    changed_keys = read_files(spark, plan.schema, plan.change_files, all_nullable=True)
    changed_keys = changed_keys.select(*[f"`{k}`" for k in keys]).distinct()
    threshold = int(table.prop("merge-on-read.broadcast-threshold-rows"))  # type: ignore[call-overload]
    if plan.change_rows <= threshold:
        changed_keys = broadcast(changed_keys)
    latest = latest_changes(spark, table, plan)
    columns = [f"`{c}`" for c in base.columns]
    kept = base.join(changed_keys, on=keys, how="left_anti").select(*columns)  # a join puts keys first
    return kept.unionByName(latest.where(~latest[IS_DELETE]).select(*columns))


def latest_changes(spark: SparkSession, table: ArcticTable, plan: ReadPlan) -> DataFrame:
    """The newest change per key among the plan's change files, with ``_arctic_txn``/``_arctic_is_delete``.

    Each file's transaction and kind come from the plan, joined on Spark's ``_metadata.file_path``
    (a small broadcast): the files themselves carry only the table's columns. Within one
    transaction a key appears once, so the newest row per key is unique.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = read_files(spark, plan.schema, plan.change_files, all_nullable=True)
    files = spark.createDataFrame(
        [(storage.spark_path(f.path), f.sequence_number, f.is_delete) for f in plan.change_files],
        f"{FILE} string, {TXN} long, {IS_DELETE} boolean",
    )
    tagged = rows.withColumn(FILE, F.col("_metadata.file_path")).join(F.broadcast(files), on=FILE).drop(FILE)
    newest_first = Window.partitionBy(*[F.col(f"`{k}`") for k in table.primary_key]).orderBy(F.col(TXN).desc())
    return tagged.withColumn(RANK, F.row_number().over(newest_first)).where(F.col(RANK) == 1).drop(RANK)
