"""Aggregate pushdown (arctic_sql.statements.aggregate_pushdown): which statements it takes, how it rewrites
them, and the partials of a node group against pyarrow's own aggregates of all the rows."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, DoubleType, LongType, NestedField, StringType, StructType
from sqlglot import exp

from arctic_sql.parser import parse_one, to_spark_sql
from arctic_sql.statements import aggregate_pushdown as ap

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "status", StringType()),
    NestedField(3, "amount", DoubleType()),
    NestedField(4, "n", LongType()),
    NestedField(5, "day", DateType()),
    NestedField(6, "info", StructType(NestedField(7, "x", LongType()))),
)


def _analyze(sql: str):
    select = parse_one(sql)
    node = next(t for t in select.find_all(exp.Table) if t.name == "t")
    return select, node, ap.analyze(node.parent_select, node, SCHEMA)


@pytest.mark.parametrize(
    ("sql", "group_by", "partials"),
    [
        (
            "SELECT status, count(*) AS c, sum(amount) AS s FROM db.t GROUP BY status",
            ("status",),
            [("count_all", None), ("sum", "amount")],
        ),
        (
            "SELECT count(1), count(status), min(day), max(status), sum(n) FROM db.t",
            (),
            [("count_all", None), ("count", "status"), ("min", "day"), ("max", "status"), ("sum", "n")],
        ),
        (
            (
                "SELECT x.status, sum(x.amount) / count(*) FROM db.t x GROUP BY x.status HAVING count(*) > 2 "
                "ORDER BY 2 DESC LIMIT 3"
            ),
            ("status",),
            [("sum", "amount"), ("count_all", None)],
        ),
        (
            "SELECT STATUS, day, max(N) AS top FROM db.t GROUP BY status, DAY ORDER BY top",
            ("status", "day"),
            [("max", "n")],
        ),
    ],
)
def test_decomposable_aggregates_over_one_table_push_down(sql, group_by, partials):
    _, _, analyzed = _analyze(sql)
    assert analyzed is not None
    pushdown, _ = analyzed
    assert pushdown.group_by == group_by
    assert [(p.kind, p.column) for p in pushdown.partials] == partials


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT status, count(*) FROM db.t WHERE amount > 0 GROUP BY status",  # a WHERE needs the rows
        "SELECT status, avg(amount) FROM db.t GROUP BY status",  # not decomposed here
        "SELECT count(DISTINCT status) FROM db.t",
        "SELECT count(*) FILTER (WHERE amount > 1) FROM db.t",
        "SELECT status, sum(amount * 2) FROM db.t GROUP BY status",  # an expression inside
        "SELECT upper(status), count(*) FROM db.t GROUP BY upper(status)",
        "SELECT status, count(*) FROM db.t GROUP BY ROLLUP (status)",
        "SELECT status, amount, count(*) FROM db.t GROUP BY status",  # amount is not grouped
        "SELECT status, count(*) OVER () FROM db.t",
        "SELECT t.status, count(*) FROM db.t JOIN db.u ON t.id = u.id GROUP BY t.status",
        "SELECT status FROM db.t",  # no aggregate at all
        "SELECT max(amount) FROM db.t",  # floating min/max: NaN orders differently in pyarrow
        "SELECT sum(status) FROM db.t",
        "SELECT my_udaf(1), count(*) FROM db.t",  # a function sqlglot does not know may aggregate
        "SELECT count(*) FROM db.t WHERE id IN (SELECT id FROM db.u)",
        "SELECT status, count(*) FROM db.t TABLESAMPLE (10 PERCENT) GROUP BY status",
        "SELECT sum(info.x) FROM db.t",
    ],
)
def test_statements_that_need_the_rows_are_left_alone(sql):
    assert _analyze(sql)[2] is None


def test_the_rewrite_combines_partials_and_keeps_spark_names():
    select, _, (_, by_node) = _analyze(
        "SELECT status, count(*), sum(n) AS total, sum(amount) FROM db.t GROUP BY status HAVING count(*) > 1 "
        "ORDER BY total"
    )
    assert ap.needs_names(select)
    ap.rewrite(select, by_node, SCHEMA, ["status", "count(1)", "total", "sum(amount)"])
    assert to_spark_sql(select) == (
        "SELECT status, COALESCE(SUM(_arctic_partial_0), 0) AS `count(1)`, "
        "CAST(SUM(_arctic_partial_1) AS BIGINT) AS total, SUM(_arctic_partial_2) AS `sum(amount)` "
        "FROM db.t GROUP BY status HAVING COALESCE(SUM(_arctic_partial_0), 0) > 1 ORDER BY total"
    )


def _rows(rng: random.Random, n: int) -> pa.Table:
    statuses = ["new", "paid", None, "shipped"]
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "status": pa.array([rng.choice(statuses) for _ in range(n)], pa.string()),
            "amount": pa.array([rng.choice([None, rng.uniform(-5, 5)]) for _ in range(n)], pa.float64()),
            "n": pa.array([rng.choice([None, rng.randint(-(2**62), 2**62)]) for _ in range(n)], pa.int64()),
        }
    )


@pytest.mark.parametrize("seed", range(6))
def test_partials_of_node_groups_combine_to_the_aggregates_of_all_rows(seed):
    rng = random.Random(seed)
    _, _, (pushdown, _) = _analyze(
        "SELECT status, count(*), count(amount), sum(amount), sum(n), min(n), max(status) FROM db.t GROUP BY status"
    )
    rows = _rows(rng, rng.randint(0, 300))
    cuts = sorted(rng.sample(range(rows.num_rows + 1), 3))
    groups = [rows.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, rows.num_rows], strict=True)]
    partials = pa.concat_tables([ap.partial_aggregate(g, pushdown) for g in groups])
    combined = {}
    for row in partials.to_pylist():
        c = combined.setdefault(row["status"], [0, 0, None, None, None, None])
        values = [row[p.name] for p in pushdown.partials]
        c[0] += values[0]
        c[1] += values[1]
        for i, merge in ((2, lambda a, b: a + b), (3, lambda a, b: a + b), (4, min), (5, max)):
            if values[i] is not None:
                c[i] = values[i] if c[i] is None else merge(c[i], values[i])
    for status, (count, valid, amount, total, low, high) in combined.items():
        mine = rows.filter(pc.is_null(rows["status"]) if status is None else pc.equal(rows["status"], status))
        ns = [v for v in mine["n"].to_pylist() if v is not None]
        amounts = [v for v in mine["amount"].to_pylist() if v is not None]
        assert count == mine.num_rows and valid == len(amounts)
        assert total == (sum(ns) if ns else None)  # exact past 2**63: the partials are DECIMAL(38, 0)
        assert low == (min(ns) if ns else None) and high == status
        assert amount == (pytest.approx(sum(amounts)) if amounts else None)
    assert set(combined) == set(rows["status"].to_pylist())
