"""The Parquet files of a Hive sync, written as optimizing writes its files: each node group merged
in pyarrow inside a Spark task and written there, one Spark job of one task per core, nothing but
file names back to the driver (table/reading/merge_on_read.by_node reads the same groups; the
Spark writer would take every row across from Python to the JVM and shuffle it by partition).

A partition's folder is ``{sync folder}/col=value/...`` spelled as Spark's own writer spells it, so
a reader that infers partitions from folder names (``spark.read.parquet`` with a ``basePath``) reads
the same values; the files hold the columns without the partition columns, as Hive expects.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from arctic_sql.table.files import storage
from arctic_sql.table.model.schemas import spark_schema
from arctic_sql.table.reading import node_merge
from arctic_sql.table.reading.merge_on_read import balance, node_groups

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arctic_sql.table.model.table import ArcticTable
    from arctic_sql.table.reading.scan import ReadPlan


def write_by_node(
    spark: SparkSession,
    table: ArcticTable,
    plan: ReadPlan,
    partition_columns: list[str],
    folders: dict[str, str],
) -> dict[str, list[str]] | None:
    """Write the merged rows of ``plan`` (its files: the partitions to write) into ``folders``
    (partition -> its folder); return the files written per partition (a partition left without
    rows has none). None when a node group is over ``merge-on-read.in-memory-max-bytes``: the
    caller writes through Spark's plan, which spills."""
    from pyspark.sql.pandas.types import to_arrow_schema

    files = [*plan.base_files, *plan.change_files]
    groups = node_groups(files) if table.is_keyed else [[f] for f in plan.base_files]
    if not groups:
        return {}
    sizes = [sum(f.file_size for f in g) for g in groups]
    if max(sizes) > table.settings.merge_on_read_in_memory_max_bytes:
        return None
    jobs = [(node_merge.NodeTask.of(g), g[0].partition) for g in groups]
    slots = balance(sizes, spark.sparkContext.defaultParallelism)
    schema = plan.schema
    data = [f.name for f in schema.fields if f.name not in partition_columns]
    arrow_type = to_arrow_schema(spark_schema(schema.select(*data), all_nullable=True), timezone="UTC")
    primary = list(table.primary_key)
    engine = table.merge_engine if table.is_keyed else None
    base, change = node_merge.Store.both(table) if table.is_keyed else (node_merge.Store.of(table.base), None)
    token = uuid.uuid4().hex[:12]

    def run(slot: int) -> list[tuple[str, str]]:
        written = []
        for i in slots[slot]:
            job, partition = jobs[i]
            if change is not None:
                rows = node_merge.read_node(job, schema, primary, base, change, sort=False, engine=engine)
            else:
                rows = base.read(job.base_files, schema, deletes=job.delete_map)
            if not rows.num_rows:
                continue
            fs, path = storage.folder(folders[partition])
            target = f"{path.rstrip('/')}/part-{i:05d}-{token}.parquet"
            pq.write_table(rows.select(data).cast(arrow_type), target, filesystem=fs)
            written.append((partition, storage.prefix(folders[partition], path) + target))
        return written

    found: dict[str, list[str]] = {}
    shipped = storage.shipped(run)
    for partition, path in (
        spark.sparkContext.parallelize(range(len(slots)), len(slots)).flatMap(shipped).collect()
    ):
        found.setdefault(partition, []).append(path)
    return found


def folder_names(
    spark: SparkSession, partition_columns: list[str], values: dict[str, tuple[str | None, ...]]
) -> dict[str, str]:
    """Each partition's folder below a sync's folder, ``col=value/...`` as Spark's writer escapes
    it (a NULL as ``__HIVE_DEFAULT_PARTITION__``)."""
    jvm: Any = spark._jvm
    utils = jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils
    default = utils.DEFAULT_PARTITION_NAME()

    def part(value: str | None) -> str:
        return default if value is None else utils.escapePathName(value)

    return {
        partition: "/".join(
            f"{utils.escapePathName(k)}={part(v)}" for k, v in zip(partition_columns, row, strict=True)
        )
        for partition, row in values.items()
    }
