"""A lookup join streamed into an arctic table, as its own process (test_lookup_restart.py kills it).

    python lookup_restart_driver.py <warehouse> <facts folder> <checkpoint> <cache dir>

Joins the Parquet fact files of the folder (``fid BIGINT, id BIGINT``, one file per micro-batch)
with ``db.dim`` (``how="left"``, the version each fact met in column ``v``) and streams the result
into the primary-key table ``db.out`` (key ``fid``) through the exactly-once arctic sink, every
100 ms, until killed. Both tables must exist. Small on purpose: one core, two buckets, two shuffle
partitions, so that a start and a few batches take seconds.
"""

from __future__ import annotations

import sys

import arctic_sql
from arctic_sql.spark import local_session
from arctic_sql.streaming import lookup_join


def main(warehouse: str, facts: str, checkpoint: str, cache_dir: str) -> None:
    spark = local_session(
        warehouse,
        {"spark.master": "local[1]", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"},
    )
    arctic_sql.connect(warehouse=warehouse, spark=spark)
    stream = spark.readStream.schema("fid BIGINT, id BIGINT").option("maxFilesPerTrigger", 1).parquet(facts)
    joined = lookup_join(
        stream,
        "db.dim",
        on="id",
        how="left",
        version_column="v",
        options={"lookup.buckets": "2", "lookup.cache-dir": cache_dir},
    )
    query = (
        joined.writeStream.format("arctic")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="100 milliseconds")
        .start("db.out")
    )
    print("STARTED", query.id, flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:5])
