"""The row-group filter of a many-key lookup (lookup.plan_many) passes every key it was made from."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.expressions.visitors import expression_evaluator
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from arctic_sql.table.reading import lookup

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True), NestedField(2, "p", StringType(), required=True)
)


@pytest.mark.parametrize("count", [3, lookup.IN_LIST_MAX_VALUES, lookup.IN_LIST_MAX_VALUES + 1, 5000])
def test_every_key_passes_and_the_filter_matches_key_filter(count: int) -> None:
    ids = list(range(0, 3 * count, 3))  # keys with gaps: a row group may hold only keys between
    parts = ["a", "b"] * (count // 2) + ["a"] * (count % 2)
    wanted = pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array(parts)})
    condition = lookup._many_filter(wanted, ["id", "p"])
    assert condition == lookup.key_filter(["id", "p"], list(zip(ids, parts, strict=True)))
    passes = expression_evaluator(SCHEMA, condition, case_sensitive=True)
    assert all(passes(Record(i, p)) for i, p in zip(ids, parts, strict=True))
    assert not passes(Record(3 * count, "a"))  # past the largest key
