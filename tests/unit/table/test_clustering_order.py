"""Clustering's pure parts: the Z-order value over Arrow, the order of rows, the checks of columns."""

from __future__ import annotations

import datetime
import random

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, LongType, NestedField, StringType, StructType

from arctic_sql.errors import InvalidArgumentError, NoSuchColumnError
from arctic_sql.table.format import clustering
from arctic_sql.table.format.clustering import SORT, ZORDER, Clustering

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "day", DateType()),
    NestedField(3, "customer", StringType()),
    NestedField(4, "st", StructType(NestedField(5, "x", LongType()))),
    identifier_field_ids=[1],
)


def test_interleave_takes_one_bit_of_each_column_in_turn():
    a = np.array([0b11, 0b00, 0b10], dtype=np.uint64)
    b = np.array([0b00, 0b11, 0b01], dtype=np.uint64)
    # bits a1 b1 a0 b0
    assert clustering.interleave([a, b], 2).tolist() == [0b1010, 0b0101, 0b1001]
    assert clustering.interleave([a], 2).tolist() == a.tolist()


def test_scaled_ranks_span_the_bits_and_keep_order_ties_and_nulls_first():
    column = pa.array(["b", None, "a", "b", "zz"])
    ranks = clustering.scaled_ranks(column, 4)
    assert ranks.tolist() == [7, 0, 3, 7, 15]  # floor((rank - 1) / 4 * 15), ties share the lowest rank
    assert clustering.scaled_ranks(pa.array([5]), 4).tolist() == [0]


@pytest.mark.parametrize(
    "values",
    [
        [3, -7, 10**12, 0],  # ints, negative and large
        [datetime.date(2026, 1, d) for d in (9, 1, 30, 2)],
        [datetime.datetime(2026, 1, 1, h) for h in (5, 1, 23, 2)],
        ["pear", "apple", "zebra", "apricot"],  # strings: by their bytes
    ],
)
def test_a_z_value_keeps_each_column_s_order_when_the_other_is_fixed(values):
    rows = pa.table({"a": values, "b": [1, 1, 1, 1]})
    z = clustering.z_values(rows, ["a", "b"])
    assert np.argsort(z).tolist() == sorted(range(4), key=lambda i: values[i])


def test_z_order_clusters_both_columns_better_than_a_sort_by_one():
    """Cut into 16 chunks, Z-ordered rows span a narrow range of *both* columns; sorted rows only
    of the first."""
    rng = random.Random(7)
    n = 4096
    rows = pa.table(
        {"a": [rng.randrange(1000) for _ in range(n)], "b": [rng.randrange(1000) for _ in range(n)]}
    )

    def mean_span(table: pa.Table, column: str) -> float:
        values = np.array(table.column(column).to_pylist())
        return float(np.mean([np.ptp(c) for c in np.array_split(values, 16)]))

    z = clustering.ordered(rows, Clustering(ZORDER, ("a", "b")))
    by_a = clustering.ordered(rows, Clustering(SORT, ("a", "b")))
    assert sorted(z.column("a").to_pylist()) == sorted(rows.column("a").to_pylist())  # same rows
    assert mean_span(z, "a") < 600 and mean_span(z, "b") < 600
    assert mean_span(by_a, "a") < 100 and mean_span(by_a, "b") > 900


def test_sort_order_is_lexicographic_and_none_keeps_rows():
    rows = pa.table({"a": [2, 1, 2, 1], "b": ["y", "z", "x", "w"]})
    assert clustering.ordered(rows, Clustering(SORT, ("a", "b"))).to_pylist() == [
        {"a": 1, "b": "w"},
        {"a": 1, "b": "z"},
        {"a": 2, "b": "x"},
        {"a": 2, "b": "y"},
    ]
    assert clustering.ordered(rows, None) is rows


def test_the_order_is_read_from_properties_and_leaves_out_columns_gone():
    assert Clustering.of({}, SCHEMA) is None
    found = Clustering.of({clustering.COLUMNS: "day, gone ,customer", clustering.MODE: ZORDER}, SCHEMA)
    assert found == Clustering(ZORDER, ("day", "customer"))
    assert found.describe() == "CLUSTER BY (day, customer)"
    assert Clustering.of({clustering.COLUMNS: "gone"}, SCHEMA) is None


def test_checks_name_the_problem():
    assert clustering.check(["DAY", "id"], SCHEMA, ["id"], "db.t") == ["day", "id"]
    with pytest.raises(NoSuchColumnError, match="Cannot order db.t by 'nope': no such column"):
        clustering.check(["nope"], SCHEMA, ["id"], "db.t")
    with pytest.raises(InvalidArgumentError, match="'st': a struct"):
        clustering.check(["st"], SCHEMA, ["id"], "db.t")
    with pytest.raises(InvalidArgumentError, match="primary key only"):
        clustering.check(["id"], SCHEMA, ["id"], "db.t")
    with pytest.raises(InvalidArgumentError, match="'day' twice"):
        clustering.check(["day", "Day"], SCHEMA, ["id"], "db.t")
