"""Run a plan's optimizing tasks on Spark. The executor writes files; it never commits.

The planner's tasks decide *which* files are merged and into which target node. A key's rows never
leave its target node, so each task merges alone. Two ways run them, both as Spark jobs:

- **In memory, node by node** (``node_merge``): a task whose input is at most
  ``self-optimizing.execute.in-memory-max-bytes`` and lies at or below its target node is read,
  merged and written by pyarrow inside a Spark task: no shuffle, and only the change rows are
  sorted. All such tasks of a plan run as one Spark job of one Spark task per core, each taking
  its share of the nodes in turn.
- **A Spark query** for the rest (larger tasks, and tasks with upper files whose rows must be split
  by node): one query for all of them, with a single shuffle by target node and a window per key.
  Spark spills its shuffle and window to disk, so change data larger than memory still merges.

Both apply the rule merge-on-read applies, so optimized files hold exactly the rows a reader saw,
and both lay files out alike: partition and node directories, files sorted by key and split at the
target size. Nothing is collected to the driver but file names. A failed attempt is cleaned up and
retried up to ``self-optimizing.execute.num-retries`` times.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arctic_sql.errors import ExecutionError
from arctic_sql.faults import fault_point
from arctic_sql.optimizer.cancellation import OptimizingCancelledError
from arctic_sql.optimizer.planner import Task, unique_inputs
from arctic_sql.table.files import position_deletes, storage
from arctic_sql.table.format import layout
from arctic_sql.table.format.clustering import ZORDER, Clustering, bits_per_column
from arctic_sql.table.format.clustering import ordered as ordered_rows
from arctic_sql.table.format.layout import Store
from arctic_sql.table.format.partitioning import HELPER_PREFIX
from arctic_sql.table.reading import engine_fold, node_merge
from arctic_sql.table.reading.merge_on_read import TAG, balance, folded, read_files
from arctic_sql.table.writing import bulk_base_files, spark_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from arctic_sql.table.model.table import ArcticTable

log = logging.getLogger(__name__)


@dataclass
class Execution:
    paths: list[str]  # the files written
    duration_ms: int
    attempts: int


def in_memory(table: ArcticTable, task: Task) -> bool:
    """Whether ``task`` merges in memory: small enough, every input within its target node."""
    limit = table.settings.execute_in_memory_max_bytes
    if not table.is_keyed:
        # Nothing to merge: the Spark query only cuts the rows into target-size files. On an object
        # store, where Spark's own reader would need a JVM connector, pyarrow does it in the tasks.
        return (
            storage.is_remote(table.base.location())
            and task.input_bytes <= limit
            and all(f.data_file is not None for f in task.input_files)
        )
    return (
        table.is_keyed
        and task.target_node is not None
        and not task.has_upper_files
        and task.input_bytes <= limit
        and all(f.data_file is not None for f in task.input_files)
    )


def node_task(task: Task, location: str) -> node_merge.NodeTask:
    """The in-memory merge of ``task``, writing into its partition's and node's directory under
    ``location``. The partition directories are copied from an input file: the planner keeps a
    task within one partition, and its inputs were written with the same helper directories."""
    first = task.input_files[0].path
    partition_dirs = [s for s in first.split("/") if s.startswith(HELPER_PREFIX) and "=" in s]
    node = [] if task.target_node is None else [f"{layout.NODE_COLUMN}={task.target_node}"]
    directory = "/".join([location.rstrip("/"), *partition_dirs, *node])
    return node_merge.NodeTask.of(task.base_files + task.change_files, directory, kept=task.kept_files)


def run_in_memory(spark: SparkSession, table: ArcticTable, tasks: list[Task], location: str) -> list[str]:
    """One Spark job, one Spark task per core, each reading, merging and writing its share of the
    planner tasks' nodes in turn in pyarrow (``reader.balance``: the largest first); return the
    files the tasks report having written."""

    schema, keys, engine = (
        table.schema,
        list(table.primary_key),
        table.merge_engine if table.is_keyed else None,
    )
    base, change = node_merge.Store.both(table) if table.is_keyed else (node_merge.Store.of(table.base), None)
    rows_per_file, target_size = spark_files.max_rows_per_file(table), table.settings.target_size
    jobs = [(node_task(t, location), t.ordered) for t in tasks]
    shares = [
        [jobs[i] for i in share]
        for share in balance([t.input_bytes for t in tasks], spark.sparkContext.defaultParallelism)
    ]
    clustering = Clustering.of(table.properties, schema)
    row_group_rows = table.settings.write_cluster_row_group_rows
    plain_row_group_rows = table.settings.write_parquet_row_group_rows

    def run(share: list[tuple[node_merge.NodeTask, bool]]) -> list[str]:
        written = []
        for job, ordered in share:
            if job.kept_files:
                # Only a keyed table's minor tasks keep files (planner.plan_partition).
                assert change is not None
                rows, gone = node_merge.minor_node(job, schema, keys, base, change, engine)
                written += [
                    position_deletes.write(job.directory, path, positions) for path, positions in gone.items()
                ]
            elif change is None:  # no key: the rows as they are, without those deleted
                rows = base.read(job.base_files, schema, deletes=job.delete_map)
            else:
                rows = node_merge.read_node(job, schema, keys, base, change, engine=engine)
                if (
                    not job.change_files and not ordered
                ):  # files of another order (clustered) back to key order
                    rows = rows.sort_by([(k, "ascending") for k in keys])
            per_file = _rows_per_file(job, target_size, rows_per_file)
            if ordered and clustering is not None:  # cut into files and row groups after ordering
                rows = ordered_rows(rows, clustering)
                written += node_merge.write_node(rows, job.directory, schema, per_file, row_group_rows)
            else:
                written += node_merge.write_node(rows, job.directory, schema, per_file, plain_row_group_rows)
            fault_point(
                "optimize-task-wrote"
            )  # a task slow after its first file: the cancel test stalls here
        return written

    return (
        spark.sparkContext.parallelize(shares, len(shares)).flatMap(storage.shipped(run)).collect()
    )  # only file names come back


def _rows_per_file(job: node_merge.NodeTask, target_size: int, fallback: int) -> int:
    """Rows per file of about ``target_size``, from the row width the node's base files show once
    compressed (``fallback`` assumes a width: it leaves files far from the target when rows are
    narrower, and a node of such files looked undersized to every following optimize)."""
    base = [*job.base_files, *job.kept_files]
    rows = sum(f.record_count for f in base)
    if rows < 1000:  # too few to judge a width by: footers dominate a small file
        return fallback
    width = sum(f.file_size_in_bytes for f in base) / rows
    return max(1, int(target_size / width))


def merged_rows(spark: SparkSession, table: ArcticTable, tasks: list[Task]) -> tuple[DataFrame, list[str]]:
    """The rows the tasks write, laid out for the base store (see ``spark_files.laid_out``).

    One shuffle: every input row (base rows as transaction 0, change rows tagged with their
    transaction and kind from a literal path map: no join, no extra job) goes to the Spark partition
    of its directory (partition and target node), and a window per key inside it keeps the newest
    row; a winning delete drops the key. Each Spark partition then holds whole node groups, so the
    writer needs no second shuffle.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    base = tuple(unique_inputs(tasks, "base_files"))
    change = tuple(unique_inputs(tasks, "change_files"))
    if not table.is_keyed:  # no key, no merge: cut the rows into target-size files
        target = table.settings.target_size
        rows = read_files(spark, table, table.schema, base)
        return spark_files.laid_out(
            rows.coalesce(max(1, math.ceil(sum(f.file_size for f in base) / target))), table, Store.BASE
        )
    columns = [F.col(f"`{c}`") for c in (f.name for f in table.schema.fields)]
    rows = read_files(spark, table, table.schema, base, all_nullable=True).select(
        *columns, F.lit(engine_fold.BASE_TAG).cast("long").alias(_TAG)
    )
    if change:
        changed = read_files(spark, table, table.schema, change, all_nullable=True, tagged=True)
        rows = rows.unionByName(changed.select(*columns, F.col(_TAG)))
    out, directories = spark_files.laid_out(rows, table, Store.BASE)
    engine = table.merge_engine
    if not engine.newest_wins:  # the engine folds every row of a key: sorted per directory and key
        by = [*directories, *table.primary_key]
        spark_type = out.drop(_TAG).schema
        return folded(out, [F.col(d) for d in directories], by, engine, spark_type), directories
    newest_first = Window.partitionBy(
        *[F.col(d) for d in directories], *[F.col(f"`{k}`") for k in table.primary_key]
    ).orderBy(F.col(_TAG).desc())
    out = (
        out.repartition(*[F.col(d) for d in directories])
        .withColumn(_RANK, F.row_number().over(newest_first))
        .where((F.col(_RANK) == 1) & (F.col(_TAG) % 2 == 0))  # the newest change is not a delete
        .drop(_RANK, _TAG)
    )
    return out, directories


def write_order(
    rows: DataFrame, table: ArcticTable, directories: list[str]
) -> tuple[DataFrame, spark_files.WriteOrder | None]:
    """The merged rows with what the writer sorts each node's rows by in the table's clustering
    order (``format/clustering.py``), as Spark expressions. A Z-order value interleaves each
    column's ``percent_rank`` within its directory scaled to ``bits_per_column`` bits: the value
    ``clustering.z_values`` computes over Arrow."""
    from functools import reduce

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    clustering = Clustering.of(table.properties, table.schema)
    if clustering is None:
        return rows, None
    block = max(1024 * 1024, table.settings.target_size // 16)  # row groups whose bounds skip
    keys = [F.col(f"`{k}`") for k in table.primary_key]
    if clustering.mode != ZORDER or len(clustering.columns) == 1:
        return rows, spark_files.WriteOrder(
            [*(F.col(f"`{c}`") for c in clustering.columns), *keys], block_bytes=block
        )
    count = len(clustering.columns)
    bits = bits_per_column(count)
    ranks = [f"{_ZVALUE}_{i}" for i in range(count)]
    for c, rank in zip(clustering.columns, ranks, strict=True):
        within = Window.partitionBy(*[F.col(d) for d in directories]).orderBy(
            F.col(f"`{c}`").asc_nulls_first()
        )
        rows = rows.withColumn(
            rank, F.floor(F.percent_rank().over(within) * float((1 << bits) - 1)).cast("long")
        )
    terms = [
        F.shiftleft(F.shiftright(F.col(rank), bit).bitwiseAND(F.lit(1)), bit * count + count - 1 - i)
        for bit in range(bits)
        for i, rank in enumerate(ranks)
    ]
    rows = rows.withColumn(_ZVALUE, reduce(lambda a, b: a.bitwiseOR(b), terms))
    return rows, spark_files.WriteOrder([F.col(_ZVALUE), *keys], [_ZVALUE, *ranks], block)


_ZVALUE = "_arctic_zvalue"
_TAG = TAG  # transaction * 2 + (1 if a delete): orders by transaction, tells the kind
_RANK = "_arctic_rank"


def job_group(location: str) -> str:
    """The Spark job group of the tasks writing under ``location`` (what a cancel cancels)."""
    return location.rstrip("/").rsplit("/", 1)[-1]


def run_tasks(
    spark: SparkSession,
    table: ArcticTable,
    tasks: list[Task],
    location: str,
    retries: int,
    cancelled: Callable[[], bool] = lambda: False,
) -> Execution:
    """Run the tasks of one plan, writing under ``location``; retry a failed attempt from scratch
    unless ``cancelled()`` says the process was cancelled (then raise OptimizingCancelledError)."""
    started = time.monotonic()
    sc = spark.sparkContext
    group = job_group(location)
    in_arrow: list[Task] = []
    in_spark: list[Task] = []
    for task in tasks:
        (in_arrow if in_memory(table, task) else in_spark).append(task)
    if any(
        task.kept_files for task in in_spark
    ):  # the Spark query rewrites whole files: it would keep both rows
        raise ExecutionError(
            f"Optimizing {table.identifier}: a task that keeps base files is too large to merge "
            "in memory (planner and executor disagree on execute.in-memory-max-bytes)"
        )
    for attempt in range(retries + 1):
        if cancelled():
            raise OptimizingCancelledError(f"Optimizing {table.identifier} was cancelled")
        try:
            sc.setJobGroup(
                group, f"optimize {table.identifier}: {len(tasks)} task(s)", interruptOnCancel=True
            )
            # The files to commit are those the write reports, never a listing of the folder.
            paths: list[str] = []
            if in_spark:  # first: Spark's writer wants a location that does not exist yet
                rows, directories = merged_rows(spark, table, in_spark)
                order = None
                if any(t.ordered for t in in_spark):  # one query: ordered if any of its tasks is
                    rows, order = write_order(rows, table, directories)
                paths += bulk_base_files.write_laid_out_files(
                    rows, table, directories, location, clustered=table.is_keyed, order=order
                )
            if in_arrow:
                paths += run_in_memory(spark, table, in_arrow, location)
            return Execution(sorted(paths), int((time.monotonic() - started) * 1000), attempt + 1)
        except Exception as e:
            storage.delete_tree(location)  # nothing under it is referenced: no commit has begun
            if cancelled():
                raise OptimizingCancelledError(f"Optimizing {table.identifier} was cancelled") from e
            message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if attempt == retries:
                raise ExecutionError(
                    f"Optimizing {table.identifier} failed after {attempt + 1} attempt(s): {message}"
                ) from e
            log.warning(
                "optimizing %s failed (attempt %d of %d), retrying: %s",
                table.identifier,
                attempt + 1,
                retries + 1,
                message,
            )
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    raise AssertionError("unreachable")
