"""Merge-on-read: a version of a table as one Spark DataFrame over its planned files.

The rule (DESIGN "Transactions and order"): for each key, the change with the highest transaction
above the partition's watermark wins over older changes and over the base; a winning delete removes
the key. The planner already dropped change files at or below the watermark. Two ways apply it:

- **By node, in memory** (``node_merge``), when every node group's files are at most
  ``merge-on-read.in-memory-max-bytes``: a key's rows all lie in one node of its partition, so
  each node group merges alone in one Spark task (``mapInArrow``), with no shuffle and no
  broadcast; only its change rows are sorted. It reads only the columns the statement names
  (``runner.referenced_columns``) and skips the row groups that the plan's filters rule out by
  their statistics; the rest of the query, its WHERE included, runs above it.
- **As a Spark plan** otherwise, which spills instead of holding a node in memory::

    changed = distinct keys of the change rows   (no order needed: any change overrides the base)
    latest  = newest change per key              (a window over the change rows only)
    result  = base LEFT ANTI JOIN changed        (the changed keys are broadcast: no base shuffle)
              UNION latest rows that are upserts

  The base side is never shuffled while the change data is small (``merge-on-read.broadcast-
  threshold-rows``). Filters and projections of the query push down through the union and the
  anti-join into both Parquet scans (row-group skipping), which ``EXPLAIN`` shows. On an object store
  or HDFS the scans are pyarrow's, in Spark tasks, a file at a time (``scanned``): Spark's own
  reader would reach those stores only through a JVM connector.

``benchmarks/merge_on_read.py`` and figure R1 of ``benchmarks/optimizing.py`` keep the measurements
behind these choices.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from arctic_sql.errors import VersionNotFoundError
from arctic_sql.table.files import storage
from arctic_sql.table.format import layout
from arctic_sql.table.format.tree import DataTreeNode
from arctic_sql.table.model.schemas import spark_schema
from arctic_sql.table.reading import engine_fold, local_rows, node_merge
from arctic_sql.table.reading.scan import ALWAYS_TRUE, FileEntry, ReadPlan

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.schema import Schema
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from arctic_sql.table.model.merge_engine import MergeEngine
    from arctic_sql.table.model.table import ArcticTable

# A read merged in the driver with no filter to apply before the hand-off takes this share of
# ``merge-on-read.driver-rows-max-bytes`` (see merged_by_node).
DRIVER_UNFILTERED_SHARE = 4
TXN = "_arctic_txn"
IS_DELETE = "_arctic_is_delete"
FILE = "_arctic_file"
RANK = "_arctic_rank"
POS = "_arctic_pos"
TAG = "_arctic_txn_op"  # node_merge.tag: transaction * 2 + (1 if a delete)
# A Spark read tags rows by a literal map of this many files at most (``with_tags``).
MAX_MAPPED_FILES = 1000
# The file bytes one task of a pyarrow scan reads at most, when there are more than cores to share them.
SCAN_TASK_BYTES = 256 * 1024 * 1024
# The attribute of a DataFrame read in the driver that says what was read (EXPLAIN shows it).
DRIVER_NOTE = "_arctic_driver_read"


def read_files(
    spark: SparkSession,
    table: ArcticTable,
    plan_schema: Schema,
    files: tuple,
    *,
    all_nullable: bool = False,
    tagged: bool = False,
) -> DataFrame:
    """The rows of ``files`` (``FileEntry`` or optimizer ``PlanFile``) of ``table``, without those
    their position-delete files delete; ``tagged``: with each row's change tag in column ``TAG``
    (``node_merge.tag`` of its file's transaction and kind: the newest change has the highest).

    Files on the local disk are read by Spark's Parquet reader (filters and projections push down
    into it); files on an object store or HDFS in pyarrow inside Spark tasks (:func:`scanned`), since
    Spark reaches those only through its Hadoop file system and a JVM connector."""
    from pyspark.sql.types import LongType, StructField, StructType

    schema = spark_schema(plan_schema, all_nullable=all_nullable)
    if tagged:
        schema = StructType([*schema.fields, StructField(TAG, LongType(), nullable=False)])
    if not files:
        return spark.createDataFrame([], schema)
    if storage.is_remote(files[0].path):
        return scanned(spark, table, plan_schema, files, schema, tagged)
    rows = spark.read.schema(spark_schema(plan_schema, all_nullable=all_nullable)).parquet(
        *[f.path for f in files]
    )
    deletes = {d.file_path for f in files for d in f.deletes}
    rows = without_deleted(spark, rows, files, sorted(deletes)) if deletes else rows
    return with_tags(spark, rows, files) if tagged else rows


def without_deleted(spark: SparkSession, rows: DataFrame, files, deletes: list[str]) -> DataFrame:  # noqa: ANN001
    """``rows`` (a Parquet read of ``files``) without the positions the delete files list: an
    anti-join on (file, row index), the way Spark's own readers apply deletion vectors. Delete
    files name data files by their Iceberg location; Spark reports its own form of the path."""
    from pyspark.sql import functions as F

    located = spark.createDataFrame(
        [(f.path, storage.spark_path(f.path)) for f in files], f"file_path string, {FILE} string"
    )
    gone = (
        spark.read.parquet(*deletes)
        .join(F.broadcast(located), on="file_path")
        .select(FILE, F.col("pos").alias(POS))
    )
    columns = [F.col(f"`{c}`") for c in rows.columns]
    return (
        rows.withColumn(FILE, F.col("_metadata.file_path"))
        .withColumn(POS, F.col("_metadata.row_index"))
        .join(gone, on=[FILE, POS], how="left_anti")
        .select(*columns)
    )


def with_tags(spark: SparkSession, rows: DataFrame, files) -> DataFrame:  # noqa: ANN001
    """``rows`` (a Spark Parquet read of ``files``) with each row's change tag in ``TAG``, found by
    its ``_metadata.file_path``: a literal map for a few files (no join, no extra job), a broadcast
    join beyond, where the map would swell the plan."""
    from pyspark.sql import functions as F

    if len(files) <= MAX_MAPPED_FILES:
        tags = F.create_map(
            *[
                x
                for f in files
                for x in (
                    F.lit(storage.spark_path(f.path)),
                    F.lit(node_merge.tag(f.sequence_number, f.is_delete)),
                )
            ]
        )
        return rows.withColumn(TAG, F.element_at(tags, F.col("_metadata.file_path")).cast("long"))
    located = spark.createDataFrame(
        [(storage.spark_path(f.path), node_merge.tag(f.sequence_number, f.is_delete)) for f in files],
        f"{FILE} string, {TAG} long",
    )
    return rows.withColumn(FILE, F.col("_metadata.file_path")).join(F.broadcast(located), on=FILE).drop(FILE)


def scanned(
    spark: SparkSession,
    table: ArcticTable,
    plan_schema: Schema,
    files: tuple,
    spark_type: StructType,
    tagged: bool,
) -> DataFrame:
    """``read_files`` in pyarrow: Spark tasks (as many as cores, more for large reads) each read their
    share of the files one at a time, through the catalog's file I/O. A task holds one file's rows,
    never a node's: what follows (joins, windows, sorts) is Spark's and spills as it needs."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    stores = {layout.Store.BASE: node_merge.Store.of(table.base)}
    if table.change is not None:
        stores[layout.Store.CHANGE] = node_merge.Store.of(table.change)
    jobs = [
        (f.store, f.data_file, tuple(f.deletes), node_merge.tag(f.sequence_number, f.is_delete))
        for f in files
    ]
    sizes = [f.file_size for f in files]
    slots = balance(
        sizes, max(spark.sparkContext.defaultParallelism, math.ceil(sum(sizes) / SCAN_TASK_BYTES))
    )
    arrow_type = to_arrow_schema(spark_type, timezone="UTC")
    table_name = str(table.identifier)

    def scan(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # slot indexes in, rows out
        for batch in batches:
            for slot in batch.column(0).to_pylist():
                for i in slots[slot]:
                    store, data_file, deletes, tag = jobs[i]
                    try:
                        rows = stores[store].read(
                            [data_file],
                            plan_schema,
                            deletes={data_file.file_path: deletes} if deletes else None,
                        )
                    except FileNotFoundError:  # Spark shows the driver only a worker traceback
                        raise VersionNotFoundError(
                            f"A file of {table_name} that this read needs is gone: "
                            f"{data_file.file_path} (expired or removed)"
                        ) from None
                    if tagged:
                        rows = rows.append_column(TAG, pa.array(np.full(rows.num_rows, tag, np.int64)))
                    yield from rows.cast(arrow_type).to_batches()

    scan.__name__ = f"arctic_scan[files={len(files)}]"  # as EXPLAIN shows it
    return _slots(spark, len(slots), sum(sizes)).mapInArrow(storage.shipped(scan), spark_type)


def merged_dataframe(
    spark: SparkSession,
    table: ArcticTable,
    plan: ReadPlan,
    columns: list[str] | None = None,
    in_memory: bool = True,
    rows_filter: BooleanExpression = ALWAYS_TRUE,
) -> DataFrame:
    """The rows of ``plan``'s version of ``table``; ``columns``: at least these (default all);
    ``in_memory``: whether node groups may merge in memory. ``rows_filter``: conjuncts the caller's
    query applies to these rows itself, which a merge in the driver may apply first (see
    ``by_node``); the rows may still hold some that fail it."""
    from pyspark.sql.functions import broadcast

    remote = storage.is_remote(table.base.location())
    # A read that would take Python tasks (change data to merge, or files Spark cannot reach) and is
    # small merges here instead: a Python task's start and hand-off cost many times a small merge.
    in_driver = table.settings.merge_on_read_driver_rows_max_bytes
    if table.change is None or not plan.change_files:
        # Remote files are read in pyarrow anyway: by node when they fit, which prunes row groups.
        found = (
            merged_by_node(spark, table, plan, columns, in_driver, rows_filter)
            if remote and plan.base_files
            else None
        )
        return found if found is not None else read_files(spark, table, plan.schema, plan.base_files)
    merged = (
        merged_by_node(spark, table, plan, columns, in_driver, rows_filter) if in_memory or remote else None
    )
    if merged is not None:
        return merged
    base = read_files(spark, table, plan.schema, plan.base_files)
    keys = table.primary_key
    engine = table.merge_engine
    if not engine.newest_wins:  # every row of a changed key takes part in the fold: no anti-join
        from pyspark.sql import functions as F

        stored = base.select(*[F.col(f"`{c}`") for c in base.columns], F.lit(engine_fold.BASE_TAG).alias(TAG))
        changed = read_files(spark, table, plan.schema, plan.change_files, all_nullable=True, tagged=True)
        rows = stored.unionByName(changed.select(*stored.columns))
        return folded(
            rows, [F.col(f"`{k}`") for k in keys], keys, engine, spark_schema(plan.schema, all_nullable=True)
        )
    # Every key with a change above the watermark overrides the base, whatever that change is, so
    # the anti-join side needs only the distinct changed keys: no transaction order, no file tags.
    changed_keys = read_files(spark, table, plan.schema, plan.change_files, all_nullable=True)
    changed_keys = changed_keys.select(*[f"`{k}`" for k in keys]).distinct()
    threshold = table.settings.merge_on_read_broadcast_threshold_rows
    if plan.change_rows <= threshold:
        changed_keys = broadcast(changed_keys)
    latest = latest_changes(spark, table, plan)
    columns = [f"`{c}`" for c in base.columns]
    kept = base.join(changed_keys, on=keys, how="left_anti").select(*columns)  # a join puts keys first
    return kept.unionByName(latest.where(~latest[IS_DELETE]).select(*columns))


def folded(
    rows: DataFrame, partition_by: list, keys: list[str], engine: MergeEngine, spark_type: StructType
) -> DataFrame:
    """``rows`` (tagged in ``TAG``, stored rows ``engine_fold.BASE_TAG``) folded per ``keys`` by
    ``engine``, as a Spark plan that spills: one shuffle by ``partition_by`` (which must keep a
    key's rows together), each partition sorted by key and tag, then folded in pyarrow a batch at a
    time, the last key of a batch carried over to the next. ``spark_type``: the rows without ``TAG``."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_type = to_arrow_schema(spark_type, timezone="UTC")
    names = [n for n in rows.columns if n != TAG]

    def fold(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending = None
        for batch in batches:
            part = pa.Table.from_batches([batch]).rename_columns([*names, engine_fold.TAG])
            part = part if pending is None else pa.concat_tables([pending, part])
            if not part.num_rows:
                continue
            last = int(np.flatnonzero(engine_fold.key_starts(part, keys))[-1])
            pending = part.slice(last)
            if last:
                yield from engine_fold.fold(part.slice(0, last), keys, engine).cast(arrow_type).to_batches()
        if pending is not None and pending.num_rows:
            yield from engine_fold.fold(pending, keys, engine).cast(arrow_type).to_batches()

    fold.__name__ = f"arctic_fold[{engine.engine.value}]"
    ordered = rows.select(*[F.col(f"`{n}`") for n in names], F.col(TAG)).repartition(*partition_by)
    ordered = ordered.sortWithinPartitions(*[F.col(f"`{k}`") for k in keys], F.col(TAG))
    return ordered.mapInArrow(fold, spark_type)


def latest_changes(spark: SparkSession, table: ArcticTable, plan: ReadPlan) -> DataFrame:
    """The newest change per key among the plan's change files, with ``_arctic_txn``/``_arctic_is_delete``.

    Each file's transaction and kind come from the plan (``read_files``' tag): the files themselves
    carry only the table's columns. Within one transaction a key appears once, so the newest row per
    key is unique.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = read_files(spark, table, plan.schema, plan.change_files, all_nullable=True, tagged=True)
    tagged = rows.withColumn(TXN, F.expr(f"{TAG} DIV 2")).withColumn(IS_DELETE, F.col(TAG) % 2 == 1)
    newest_first = Window.partitionBy(*[F.col(f"`{k}`") for k in table.primary_key]).orderBy(
        F.col(TAG).desc()
    )
    return tagged.withColumn(RANK, F.row_number().over(newest_first)).where(F.col(RANK) == 1).drop(RANK, TAG)


def node_groups(files: Iterable[FileEntry]) -> list[list[FileEntry]]:
    """``files`` grouped so that every key's rows lie in one group: per partition, by each file's
    ancestor at the partition's highest tree level in use (base and change may have different
    bucket counts; a file at the root makes the partition one group)."""
    by_partition: dict[str, list[FileEntry]] = {}
    for f in files:
        by_partition.setdefault(f.partition, []).append(f)
    groups: list[list[FileEntry]] = []
    for members in by_partition.values():
        nodes = {f.node_id: DataTreeNode.of_id(f.node_id) for f in members}
        mask = min(n.mask for n in nodes.values())
        by_ancestor: dict[int, list[FileEntry]] = {}
        for f in members:
            by_ancestor.setdefault(nodes[f.node_id].index & mask, []).append(f)
        groups.extend(by_ancestor.values())
    return groups


def merged_by_node(
    spark: SparkSession,
    table: ArcticTable,
    plan: ReadPlan,
    columns: list[str] | None = None,
    driver_max_bytes: int = 0,
    rows_filter: BooleanExpression = ALWAYS_TRUE,
) -> DataFrame | None:
    """The merged rows (of ``columns``, default all), each node group merged in pyarrow inside a
    Spark task, or in the driver when all the files weigh at most ``driver_max_bytes``; None when a
    group is over ``merge-on-read.in-memory-max-bytes`` (the Spark plan takes over). The key is read
    for the merge and handed to Spark only when asked for: every column crossing from Python to the
    JVM costs. Columns are nullable as in ``read_files``: all of them when change rows merge in.
    ``rows_filter``: see ``by_node``."""
    keys = list(table.primary_key)
    # Arrow batches cannot carry rows without columns: a key column (the first column of a table
    # without a key) stands in when none is asked for.
    names = [
        f.name for f in plan.schema.fields
    ]  # top level: pyiceberg's column_names lists nested fields too
    output = names if columns is None else [n for n in names if n in columns] or (keys or names)[:1]
    schema = plan.schema if columns is None else plan.schema.select(*dict.fromkeys([*keys, *output]))
    # pruning.row_filter leaves out FLOAT and DOUBLE columns (Spark and Arrow compare NaN
    # differently) and literals pyiceberg would bind inexactly: a row the query keeps passes it.
    keep = node_merge.arrow_filter(rows_filter, schema)
    if keep is None:
        # Every merged row crosses to Spark, at about 2 microseconds a row: measured here, a read
        # with no filter to apply first gains in the driver up to about 1.5 MB of files, one that
        # keeps 1% of its rows up to 6 MB and more (docs/how-it-works.md).
        driver_max_bytes //= DRIVER_UNFILTERED_SHARE
    return by_node(
        spark,
        table,
        plan,
        schema,
        spark_schema(plan.schema.select(*output), all_nullable=bool(plan.change_files)),
        lambda rows: rows.select(output),
        "arctic_merge_by_node",
        driver_max_bytes=driver_max_bytes,
        keep=keep,
    )


def by_node(
    spark: SparkSession,
    table: ArcticTable,
    plan: ReadPlan,
    schema: Schema,
    spark_type: StructType,
    finish: Callable[[pa.Table], pa.Table],
    name: str,
    dictionary: frozenset[str] = frozenset(),
    driver_max_bytes: int = 0,
    keep: pc.Expression | None = None,
) -> DataFrame | None:
    """Per node group, merge its files in ``schema`` and hand Spark ``finish`` of the rows, of
    ``spark_type``; ``dictionary``: see ``node_merge.read_node``. None when a group is too large to
    merge in memory. (The aggregate pushdown of queries finishes with partial aggregates.)

    ``driver_max_bytes``: when all the files weigh at most this, the groups merge here in the driver
    and Spark gets the finished rows as a local relation (``DRIVER_NOTE`` names what was read): for
    a small read, the Spark job (its planning, a Python task per core, the hand-off) costs many
    times the merge itself. Only for a ``finish`` that leaves few rows (partial aggregates).
    ``keep``: a filter Spark applies to these rows anyway (a SELECT's own WHERE, in Arrow); the
    merge (in the driver or in a task) drops the merged rows that fail it before the hand-off, which
    costs per row handed: about 2 microseconds a row from the driver, less from a task, where
    dropping 99% of a 2M-row read's rows took 0.85x the time of handing them all over."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    limit = table.settings.merge_on_read_in_memory_max_bytes
    engine = table.merge_engine if table.is_keyed else None
    wanted = [f.name for f in schema.fields]
    if engine is not None and not engine.newest_wins:  # the fold orders by the sequence columns too
        schema = plan.schema.select(*engine.needed(wanted)) if set(engine.sequence) - set(wanted) else schema
    # Without a key there is nothing to merge: each file is read alone.
    groups = (
        node_groups([*plan.base_files, *plan.change_files])
        if table.is_keyed
        else [[f] for f in plan.base_files]
    )
    sizes = [sum(f.file_size for f in g) for g in groups]
    if max(sizes) > limit:
        return None
    jobs = [node_merge.NodeTask.of(g) for g in groups]
    # One Spark task per core, each merging its share of the groups in turn: a Python task costs
    # about 0.1 s to start here, as much as merging a group of 500,000 rows.
    slots = balance(sizes, spark.sparkContext.defaultParallelism)
    keys = list(table.primary_key)
    base, change = node_merge.Store.both(table) if table.is_keyed else (node_merge.Store.of(table.base), None)
    arrow_type = to_arrow_schema(spark_type, timezone="UTC")  # as pyspark itself declares Arrow results
    base_filter, change_filter = plan.base_filter, plan.change_filter
    table_name, version = str(table.identifier), plan.version

    in_driver = sum(sizes) <= driver_max_bytes

    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # slot indexes in, rows out
        for batch in batches:
            for slot in batch.column(0).to_pylist():
                for i in slots[slot]:
                    try:
                        rows = (
                            node_merge.read_node(
                                jobs[i],
                                schema,
                                keys,
                                base,
                                change,
                                sort=False,
                                base_filter=base_filter,
                                change_filter=change_filter,
                                dictionary=dictionary,
                                engine=engine,
                            ).select(wanted)
                            if change is not None
                            else base.read(
                                jobs[i].base_files, schema, base_filter, dictionary, jobs[i].delete_map
                            )
                        )
                    except FileNotFoundError as e:  # Spark shows the driver only a worker traceback
                        raise node_merge.missing_file(jobs[i], table_name, version, e) from None
                    if keep is not None:
                        rows = _filtered(rows, keep)
                    yield from finish(rows).cast(arrow_type).to_batches()

    # EXPLAIN shows this name: what the merge reads, after partition, file and tree-node pruning
    # (nodes: the tree nodes, per partition, whose files it opens).
    nodes = len({(f.partition, f.store, f.node_id) for g in groups for f in g})
    read = (
        f"groups={len(jobs)}, nodes={nodes}, base_files={len(plan.base_files)}, "
        f"change_files={len(plan.change_files)}"
    )
    if in_driver:
        every_group = pa.record_batch([pa.array(range(len(slots)), pa.int32())], ["slot"])
        rows = pa.Table.from_batches(list(merge(iter([every_group]))), schema=arrow_type)
        df = local_rows.frame(spark, rows, spark_type)
        setattr(df, DRIVER_NOTE, f"{name}_in_driver[{read}]")
        return df
    merge.__name__ = f"{name}[{read}]"
    return _slots(spark, len(slots), sum(sizes)).mapInArrow(storage.shipped(merge), spark_type)


def _filtered(rows: pa.Table, keep: pc.Expression) -> pa.Table:
    """The ``rows`` that pass ``keep``, or all of them where Arrow cannot compare a column with its
    literal (Spark filters them anyway)."""
    import pyarrow as pa

    try:
        return rows.filter(keep)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return rows


def _slots(spark: SparkSession, count: int, file_bytes: int) -> DataFrame:
    """One row per task, ``slot`` 0 to ``count - 1``, that Spark sizes at about ``file_bytes``.

    Spark sizes ``mapInArrow``'s output as its input: over ``range(count)`` a merged read of any
    size looked like a few bytes, and a join broadcast it, collecting the whole table into the
    driver. So the input is a range of ``count`` equal chunks weighing what the files do, and a
    filter keeps each chunk's first element (a range's partitions are its chunks: one row per task).
    The weight is capped just above the broadcast threshold, where the decision is made: a range of
    at most a few million elements, a few milliseconds of Spark's generated code."""
    threshold = spark._jsparkSession.sessionState().conf().autoBroadcastJoinThreshold()
    # Spark's estimate: 8 bytes a range element, times 12/16 once projected to an int slot.
    chunk = max(1, min(file_bytes, 2 * threshold) // (6 * count)) if threshold > 0 else 1
    indexes = spark.range(0, count * chunk, 1, numPartitions=count)
    if chunk > 1:
        indexes = indexes.where(f"id % {chunk} = 0")
    return indexes.selectExpr(f"CAST(id DIV {chunk} AS INT) AS slot")


def balance(sizes: list[int], slots: int) -> list[list[int]]:
    """The indexes of ``sizes`` in at most ``slots`` lists of about equal total size: the largest
    first, each to the least loaded list."""
    loads: list[tuple[int, int]] = [(0, slot) for slot in range(max(1, min(slots, len(sizes))))]
    shares: list[list[int]] = [[] for _ in loads]
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        load, slot = heapq.heappop(loads)
        shares[slot].append(i)
        heapq.heappush(loads, (load + sizes[i], slot))
    return shares
