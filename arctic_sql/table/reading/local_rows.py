"""Rows held in the driver handed to Spark as a DataFrame.

pyspark 4.3's ``createDataFrame`` of a pyarrow Table keeps only the rows before the table's first
empty record batch: ``[[0], [], [1]]`` becomes one row, silently. Tables that are concatenations of
per-group results (a node merged to nothing, a lookup that found no row in one file) have such
batches, so every hand-off of Arrow rows to Spark goes through :func:`frame`, which drops them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def without_empty_batches(rows: pa.Table) -> pa.Table:
    """``rows`` with no empty record batch (no copy of the data)."""
    import pyarrow as pa

    return pa.Table.from_batches([b for b in rows.to_batches() if b.num_rows], schema=rows.schema)


def frame(spark: SparkSession, rows: pa.Table, schema: StructType) -> DataFrame:
    """``rows`` as a DataFrame of ``schema``."""
    rows = without_empty_batches(rows)
    return spark.createDataFrame(rows if rows.num_rows else [], schema)
