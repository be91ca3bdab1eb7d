"""Which columns of an arctic table a statement may use (runner.referenced_columns): a superset, so
that an in-memory merge that reads only those never hides a column the statement needs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType, StructType

from arctic_sql.parser import parse_one
from arctic_sql.statements.runner import referenced_columns

TABLE = SimpleNamespace(  # the two attributes referenced_columns reads of an ArcticTable
    primary_key=["order_id"],
    schema=Schema(
        NestedField(1, "order_id", LongType(), required=True),
        NestedField(2, "status", StringType()),
        NestedField(3, "amount", DoubleType()),
        NestedField(4, "Region", StringType()),
        NestedField(5, "info", StructType(NestedField(6, "note", StringType()))),
    ),
)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT status, count(*), sum(amount) FROM db.t GROUP BY status", ["status", "amount"]),
        ("SELECT count(1) FROM db.t", []),
        ("SELECT REGION FROM db.t WHERE t.order_id > 3", ["order_id", "Region"]),  # Spark's names ignore case
        ("SELECT x.info.note FROM db.t x JOIN other o USING (status)", ["status", "info"]),
        ("SELECT * FROM db.t", None),
        ("SELECT order_id FROM db.t NATURAL JOIN db.t", None),  # joins on every shared column, naming none
        ("SELECT t.* FROM db.t t", None),
        ("SELECT status FROM (SELECT * FROM db.t) s", None),  # a star anywhere may reach this table
        ("WITH c AS (SELECT amount FROM db.t) SELECT count(*) FROM c", ["amount"]),
    ],
)
def test_referenced_columns_are_a_superset_of_what_the_statement_reads(sql, expected):
    assert referenced_columns(parse_one(sql), TABLE) == expected
