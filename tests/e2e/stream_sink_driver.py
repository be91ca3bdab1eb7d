"""A streaming query into an arctic table, as its own process (the crash tests kill or fail it).

    python stream_sink_driver.py <warehouse> <source folder> <checkpoint> [--forever]
        [--catalog catalog.yaml --master spark://host:port] [--table db.t]

Creates ``db.t (id BIGINT, v STRING, seq BIGINT, PRIMARY KEY (id))`` (or ``--table``) if it is missing
and streams the JSON change files of the folder into it, one file per micro-batch: with
``availableNow`` and exit, or (``--forever``) until killed. Prints ``DONE`` after a clean finish.
``--catalog`` (a pyiceberg YAML file of the catalog ``arctic``) and ``--master``: a deployment's
shared catalog and a cluster (test_cluster.py), instead of local Spark and the embedded catalog.
"""

from __future__ import annotations

import argparse

import arctic_sql
from arctic_sql.spark import local_session

SCHEMA = "id BIGINT, v STRING, seq BIGINT, _change_type STRING"


def main(args: argparse.Namespace) -> None:
    if args.catalog is None:
        spark = local_session(
            args.warehouse, {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2"}
        )
        session = arctic_sql.connect(warehouse=args.warehouse, spark=spark)
    else:
        session = arctic_sql.connect(
            warehouse=args.warehouse,
            master=args.master,
            config_file=args.catalog,
            spark_conf={
                "spark.executor.memory": "512m",
                "spark.executor.cores": "1",
                "spark.cores.max": "1",
                "spark.sql.shuffle.partitions": "2",
            },
        )
        spark = session.spark
    session.sql(f"CREATE DATABASE IF NOT EXISTS {args.table.split('.')[0]}")
    session.sql(
        f"CREATE TABLE IF NOT EXISTS {args.table} (id BIGINT, v STRING, seq BIGINT, PRIMARY KEY (id))"
    )
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(args.source)
    writer = (
        stream.writeStream.format("arctic")
        .option("checkpointLocation", args.checkpoint)
        .option("sequenceColumn", "seq")
    )
    if not args.forever:
        writer = writer.trigger(availableNow=True)
    query = writer.start(args.table)
    query.awaitTermination()
    print("DONE", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("warehouse")
    parser.add_argument("source")
    parser.add_argument("checkpoint")
    parser.add_argument("--forever", action="store_true", help="run until killed (no availableNow)")
    parser.add_argument("--catalog", help="a pyiceberg YAML file of the catalog 'arctic'")
    parser.add_argument("--master", help="the Spark master (with --catalog)")
    parser.add_argument("--table", default="db.t")
    main(parser.parse_args())
