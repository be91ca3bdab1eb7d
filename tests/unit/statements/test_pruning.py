"""WHERE conjuncts to pyiceberg filters: inclusive, single-table, key-only for change files."""

from __future__ import annotations

from arctic_sql.parser import parse_one
from pyiceberg import expressions as ie
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from arctic_sql.statements.pruning import pushable_where, row_filter

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType()),
    NestedField(3, "amount", DoubleType()),
    NestedField(4, "ts", __import__("pyiceberg.types").types.TimestamptzType()),
    NestedField(5, "qty", LongType()),
)


def _filter(sql: str, allowed=None):
    select = parse_one(sql)
    table = next(select.find_all(__import__("sqlglot").exp.Table))
    where, qualifiers = pushable_where(table)
    return row_filter(where, SCHEMA, qualifiers, allowed)


def test_simple_comparisons_convert():
    f = _filter("SELECT * FROM db.t WHERE region = 'eu' AND qty > 10 AND 5 <= id")
    assert f == ie.And(ie.And(ie.EqualTo("region", "eu"), ie.GreaterThan("qty", 10)),
                       ie.GreaterThanOrEqual("id", 5))


def test_float_and_double_columns_never_prune():
    # Spark orders NaN above every number; file bounds leave NaN out, so amount > 10 could skip a NaN.
    assert _filter("SELECT * FROM db.t WHERE amount > 10 AND amount = double('NaN') AND id = 1") == ie.EqualTo("id", 1)


def test_unconvertible_conjuncts_are_left_out_and_or_needs_both_sides():
    assert _filter("SELECT * FROM db.t WHERE upper(region) = 'EU' AND id IN (1, 2)") == ie.In("id", {1, 2})
    assert _filter("SELECT * FROM db.t WHERE id = 1 OR upper(region) = 'EU'") == ie.AlwaysTrue()
    assert _filter("SELECT * FROM db.t WHERE id BETWEEN 1 AND 3") == ie.And(
        ie.GreaterThanOrEqual("id", 1), ie.LessThanOrEqual("id", 3))


def test_change_files_are_pruned_by_key_columns_only():
    assert _filter("SELECT * FROM db.t WHERE region = 'eu' AND id = 7", allowed={"id"}) == ie.EqualTo("id", 7)


def test_no_pruning_on_the_null_supplying_side_of_an_outer_join():
    assert _filter("SELECT * FROM db.t LEFT JOIN db.u ON t.id = u.id WHERE t.id = 1") == ie.AlwaysTrue()


def test_columns_of_other_tables_are_not_this_tables():
    assert _filter("SELECT * FROM db.t AS a JOIN db.u AS b ON a.id = b.id WHERE b.id = 1 AND a.qty < 3") == \
        ie.LessThan("qty", 3)


def test_literals_pyiceberg_cannot_read_are_left_out():
    # A TIMESTAMP literal without a zone is in Spark's session zone, which pruning does not know.
    assert _filter("SELECT * FROM db.t WHERE ts > TIMESTAMP '2024-01-02 00:00:00' AND id = 1") == \
        ie.EqualTo("id", 1)
    assert _filter("SELECT * FROM db.t WHERE ts > TIMESTAMP 'yesterday' AND id = 1") == ie.EqualTo("id", 1)


def test_timestamp_literals_that_name_their_zone_prune():
    for literal in ("2024-01-02 00:00:00 UTC", "2024-01-02T00:00:00Z", "2024-01-02 01:00:00+01:00"):
        f = _filter(f"SELECT * FROM db.t WHERE ts >= TIMESTAMP '{literal}'")
        bound = bind(SCHEMA, f, case_sensitive=True)
        assert bound.literal.value == 1704153600000000, literal  # 2024-01-02T00:00:00Z in microseconds
