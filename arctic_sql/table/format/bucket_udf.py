"""Iceberg's bucket partition transform as a vectorized Spark UDF (Spark has no Murmur3 of Iceberg's kind).

This module deliberately has no ``from __future__ import annotations``: PySpark reads the pandas
type hints of a pandas UDF at definition time and cannot resolve them as strings.
"""

import datetime
import math

import pandas as pd
from pyiceberg import types as it
from pyiceberg.transforms import BucketTransform


def _internal(value):
    """The Python value Iceberg's bucket transform expects (dates as days, timestamps as micros)."""
    if isinstance(value, pd.Timestamp):
        return int(value.value // 1000)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return int(value.timestamp() * 1_000_000)
    if isinstance(value, datetime.date):
        return (value - datetime.date(1970, 1, 1)).days
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def bucket_udf(source_type: it.IcebergType, buckets: int):
    from pyspark.sql import functions as F

    bucket = BucketTransform(buckets).transform(source_type)

    def iceberg_bucket(values: pd.Series) -> pd.Series:
        return pd.Series(
            [None if v is None or v is pd.NA or v is pd.NaT else bucket(_internal(v)) for v in values],
            dtype="Int32",
        )

    # pandas has no hints installed, so no overload of pyspark's knows the function's Series types.
    return F.pandas_udf(iceberg_bucket, "int")  # type: ignore[call-overload]
