"""Reads one Iceberg table with Iceberg's own Spark runtime and prints its rows as JSON lines.

Run by tests/e2e/test_iceberg_interop.py in a subprocess of the virtual environment with the pyspark
that runtime is built for (scripts/jars.lock: venv-spark4.1): no arctic_sql is imported here. The
catalog is Iceberg's JDBC catalog over the SQLite file of pyiceberg's SQL catalog that arctic-sql
keeps its stores in, under the same catalog name.

usage: iceberg_reader_driver.py JARS CATALOG_NAME SQLITE_FILE WAREHOUSE_URI TABLE
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession


def main(jars: str, catalog: str, sqlite_file: str, warehouse: str, table: str) -> None:
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("iceberg-reader")
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config(f"spark.sql.catalog.{catalog}", "org.apache.iceberg.spark.SparkCatalog")
        .config(f"spark.sql.catalog.{catalog}.type", "jdbc")
        .config(f"spark.sql.catalog.{catalog}.uri", f"jdbc:sqlite:{sqlite_file}")
        .config(f"spark.sql.catalog.{catalog}.warehouse", warehouse)
        .getOrCreate()
    )
    frame = spark.table(f"{catalog}.{table}")
    print(json.dumps({"columns": frame.columns, "spark": spark.version}), flush=True)
    for row in frame.collect():
        print(json.dumps(list(row), default=str), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
