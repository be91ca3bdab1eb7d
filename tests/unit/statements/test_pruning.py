"""WHERE conjuncts to pyiceberg filters: inclusive, single-table, key-only for change files."""

from __future__ import annotations

from pyiceberg import expressions as ie
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from arctic_sql.parser import parse_one
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
    assert f == ie.And(
        ie.And(ie.EqualTo("region", "eu"), ie.GreaterThan("qty", 10)), ie.GreaterThanOrEqual("id", 5)
    )


def test_float_and_double_columns_never_prune():
    # Spark orders NaN above every number; file bounds leave NaN out, so amount > 10 could skip a NaN.
    assert _filter(
        "SELECT * FROM db.t WHERE amount > 10 AND amount = double('NaN') AND id = 1"
    ) == ie.EqualTo("id", 1)


def test_unconvertible_conjuncts_are_left_out_and_or_needs_both_sides():
    assert _filter("SELECT * FROM db.t WHERE upper(region) = 'EU' AND id IN (1, 2)") == ie.In("id", {1, 2})
    assert _filter("SELECT * FROM db.t WHERE id = 1 OR upper(region) = 'EU'") == ie.AlwaysTrue()
    assert _filter("SELECT * FROM db.t WHERE id BETWEEN 1 AND 3") == ie.And(
        ie.GreaterThanOrEqual("id", 1), ie.LessThanOrEqual("id", 3)
    )


def test_change_files_are_pruned_by_key_columns_only():
    assert _filter("SELECT * FROM db.t WHERE region = 'eu' AND id = 7", allowed={"id"}) == ie.EqualTo("id", 7)


def test_no_pruning_on_the_null_supplying_side_of_an_outer_join():
    assert _filter("SELECT * FROM db.t LEFT JOIN db.u ON t.id = u.id WHERE t.id = 1") == ie.AlwaysTrue()


def test_columns_of_other_tables_are_not_this_tables():
    assert _filter(
        "SELECT * FROM db.t AS a JOIN db.u AS b ON a.id = b.id WHERE b.id = 1 AND a.qty < 3"
    ) == ie.LessThan("qty", 3)


def test_literals_pyiceberg_cannot_read_are_left_out():
    # A TIMESTAMP literal without a zone is in Spark's session zone, which pruning does not know.
    assert _filter("SELECT * FROM db.t WHERE ts > TIMESTAMP '2024-01-02 00:00:00' AND id = 1") == ie.EqualTo(
        "id", 1
    )
    assert _filter("SELECT * FROM db.t WHERE ts > TIMESTAMP 'yesterday' AND id = 1") == ie.EqualTo("id", 1)


def test_timestamp_literals_that_name_their_zone_prune():
    for literal in ("2024-01-02 00:00:00 UTC", "2024-01-02T00:00:00Z", "2024-01-02 01:00:00+01:00"):
        f = _filter(f"SELECT * FROM db.t WHERE ts >= TIMESTAMP '{literal}'")
        bound = bind(SCHEMA, f, case_sensitive=True)
        assert bound.literal.value == 1704153600000000, literal  # 2024-01-02T00:00:00Z in microseconds


def test_a_literal_the_column_type_would_round_or_reinterpret_does_not_prune():
    """Spark compares in the wider type, pyiceberg would bind to the column's: 12.345 rounded to 12.35
    for a DECIMAL(10,2) skipped the file holding 12.35 for `> 12.345`; a DATE literal against a
    STRING column compared strings; 1.5 against a BIGINT was cut to 1."""
    from pyiceberg.types import DateType, DecimalType

    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "s", StringType()),
        NestedField(3, "price", DecimalType(10, 2)),
        NestedField(4, "k", DecimalType(18, 4)),
        NestedField(5, "d", DateType()),
    )

    def pruned(where: str):
        select = parse_one(f"SELECT * FROM db.t WHERE {where}")
        found, qualifiers = pushable_where(next(select.find_all(__import__("sqlglot").exp.Table)))
        return row_filter(found, schema, qualifiers)

    for kept in (
        "price > 12.345",
        "price < 0.501",
        "id < 1.5",
        "s = DATE'2024-06-01'",
        "s > CAST('2024-01-01' AS DATE)",
        "s = 1",
        "d < TIMESTAMP'2024-01-01 10:00:00+00:00'",
        "price IN (1.005, 2)",
        "id BETWEEN 1 AND 2.5",
    ):
        assert pruned(kept) == ie.AlwaysTrue(), kept
    import decimal

    assert pruned("price > 12.34") == ie.GreaterThan("price", decimal.Decimal("12.34"))
    assert pruned("k = 12345678901234.5678") == ie.EqualTo("k", decimal.Decimal("12345678901234.5678"))
    assert pruned("price <= 12") == ie.LessThanOrEqual("price", 12)
    assert pruned("s = '2024-06-01' AND d = DATE'2024-06-01'") == ie.And(
        ie.EqualTo("s", "2024-06-01"), ie.EqualTo("d", "2024-06-01")
    )


def test_an_aliased_table_takes_only_conditions_on_its_alias():
    """In `d.t AS t JOIN d.t AS prev`, `t.id = 2` is the first copy's, never prev's."""
    select = parse_one(
        "SELECT t.id, prev.n FROM db.t AS t JOIN db.t AS prev ON t.id = prev.id + 1 WHERE t.id = 2"
    )
    first, second = list(select.find_all(__import__("sqlglot").exp.Table))
    for table, expected in ((first, ie.EqualTo("id", 2)), (second, ie.AlwaysTrue())):
        where, qualifiers = pushable_where(table)
        assert row_filter(where, SCHEMA, qualifiers) == expected
