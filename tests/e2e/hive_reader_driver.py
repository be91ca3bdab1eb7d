"""Reads Hive tables with a plain SparkSession with Hive support (no arctic_sql imported here) and
prints each table's rows as one JSON line: what any Hive-only engine sees of an arctic Hive view.

Run by tests/e2e/test_hive_view.py and benchmarks/hive_view.py in a subprocess.

usage: hive_reader_driver.py METASTORE_URIS TABLE [TABLE ...]
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession


def main(uris: str, tables: list[str]) -> None:
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("hive-reader")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.hadoop.hive.metastore.uris", uris)
        .enableHiveSupport()
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for table in tables:
        frame = spark.table(table)
        rows = [list(row) for row in frame.collect()]
        print(json.dumps({"table": table, "columns": frame.columns, "rows": rows}, default=str), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
