"""The options of ``spark.read.format("arctic")`` and ``readStream``, checked before anything runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql.types import StructType

    from arctic_sql.table.catalog import ArcticTable


def output_schema(table: ArcticTable, options: Mapping[str, str]) -> StructType:
    """The columns a read returns: the table's (a change feed adds its change columns)."""
    return table.spark_schema
