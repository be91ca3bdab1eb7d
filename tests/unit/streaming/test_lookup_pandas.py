"""lookup_pandas: the columns that travel through pandas come back exactly as Spark sent them."""

from __future__ import annotations

import datetime
import decimal
import math

import pandas as pd
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
)

from arctic_sql.streaming.lookup_pandas import _to_arrow, carried, transport


def test_64_bit_integers_and_floats_travel_as_strings_and_come_back_exact():
    big = 2**53 + 1  # a float64 would make it 2**53
    assert transport(LongType()) == StringType() and transport(DoubleType()) == StringType()
    assert _to_arrow(pd.Series([str(big), None], dtype=object), LongType()).to_pylist() == [big, None]
    back = _to_arrow(pd.Series(["NaN", None, "0.1", "-Infinity"], dtype=object), DoubleType()).to_pylist()
    assert math.isnan(back[0]) and back[1:] == [None, 0.1, -math.inf]  # a NaN stays a NaN, not a null


def test_narrower_types_pass_as_pandas_gives_them():
    assert transport(IntegerType()) == IntegerType()
    assert _to_arrow(pd.Series([7.0, float("nan")]), IntegerType()).to_pylist() == [7, None]  # nulls make floats
    day, amount = datetime.date(2024, 2, 29), decimal.Decimal("12.345")
    assert _to_arrow(pd.Series([day, None], dtype=object), DateType()).to_pylist() == [day, None]
    assert _to_arrow(pd.Series([amount, None], dtype=object), DecimalType(10, 3)).to_pylist() == [amount, None]


def test_types_pandas_cannot_carry_keep_the_row_operator():
    assert carried(LongType()) and carried(StringType())
    assert not carried(TimestampType()) and not carried(ArrayType(LongType()))
