"""A streaming query into an arctic table, as its own process (the crash tests kill or fail it).

    python stream_sink_driver.py <warehouse> <source folder> <checkpoint> [--forever]

Creates ``db.t (id BIGINT, v STRING, seq BIGINT, PRIMARY KEY (id))`` if it is missing and streams the
JSON change files of the folder into it, one file per micro-batch: with ``availableNow`` and exit,
or (``--forever``) until killed. Prints ``DONE`` after a clean finish.
"""

from __future__ import annotations

import sys

import arctic_sql
from arctic_sql.spark import local_session

SCHEMA = "id BIGINT, v STRING, seq BIGINT, _change_type STRING"


def main(warehouse: str, source: str, checkpoint: str, forever: bool) -> None:
    spark = local_session(warehouse, {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2"})
    session = arctic_sql.connect(warehouse=warehouse, spark=spark)
    session.sql("CREATE DATABASE IF NOT EXISTS db")
    session.sql("CREATE TABLE IF NOT EXISTS db.t (id BIGINT, v STRING, seq BIGINT, PRIMARY KEY (id))")
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(source)
    writer = (
        stream.writeStream.format("arctic")
        .option("checkpointLocation", checkpoint)
        .option("sequenceColumn", "seq")
    )
    if not forever:
        writer = writer.trigger(availableNow=True)
    query = writer.start("db.t")
    query.awaitTermination()
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], "--forever" in sys.argv)
