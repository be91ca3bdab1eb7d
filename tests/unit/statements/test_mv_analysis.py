"""Which materialized-view queries refresh incrementally, and why the others do not (no Spark)."""

from __future__ import annotations

import pytest

from arctic_sql.parser import parse_one
from arctic_sql.statements.mv_analysis import (
    Kind,
    Shape,
    analyse,
    output_expressions,
    source_names,
    state_query,
)

KEYS = {"db.orders": ("id",), "db.users": ("id",), "db.log": ()}


def _analyse(sql: str):
    query = parse_one(sql)
    names = [item.alias_or_name for item in query.expressions]
    return analyse(query, names, KEYS)


def test_filter_and_projection_keep_the_source_key_under_its_new_name():
    analysis = _analyse(
        "SELECT id AS order_id, status, amount * 2 AS doubled FROM db.orders WHERE amount > 1"
    )
    assert analysis.shape is Shape.FILTER
    assert analysis.key == ("order_id",) and analysis.source_key == ("id",)
    assert analysis.where == "amount > 1"
    assert _analyse("SELECT * FROM db.orders").key == ("id",)


def test_additive_aggregates_keep_state_columns():
    analysis = _analyse(
        "SELECT status, region, count(*) AS n, count(note) AS c, sum(amount) AS s, avg(amount) AS a "
        "FROM db.orders GROUP BY status, region"
    )
    assert analysis.shape is Shape.AGGREGATE
    assert analysis.key == ("status", "region")
    assert [a.kind for a in analysis.aggregates] == [Kind.COUNT_STAR, Kind.COUNT, Kind.SUM, Kind.AVG]
    assert analysis.state_columns == (
        "__mv_rows",
        "__mv_count_3",
        "__mv_sum_4",
        "__mv_count_4",
        "__mv_sum_5",
        "__mv_count_5",
    )
    sql = state_query(analysis, "changes", sign="__mv_sign")
    assert "SUM((__mv_sign) * (amount)) AS __mv_sum_4" in sql and sql.endswith("GROUP BY `status`, `region`")
    outputs = output_expressions(analysis, {"n": "bigint", "c": "bigint", "s": "bigint", "a": "double"})
    assert outputs["a"] == "CAST(CASE WHEN __mv_count_5 > 0 THEN __mv_sum_5 / __mv_count_5 END AS double)"


@pytest.mark.parametrize("aggregate", ["min(amount)", "max(amount)", "count(DISTINCT region)"])
def test_min_max_and_distinct_recompute_touched_groups(aggregate):
    analysis = _analyse(f"SELECT status, {aggregate} AS x, count(*) AS n FROM db.orders GROUP BY status")
    assert analysis.shape is Shape.GROUPS and analysis.key == ("status",)
    assert analysis.state_columns == ()


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("SELECT o.id, u.name FROM db.orders o JOIN db.users u ON o.id = u.id", "joins"),
        ("SELECT status FROM db.orders", "leaves out the source's key column(s) id"),
        ("SELECT count(*) AS n FROM db.orders", "without GROUP BY"),
        ("SELECT status, count(*) AS n FROM db.orders GROUP BY status HAVING count(*) > 1", "HAVING"),
        ("SELECT status, stddev(amount) AS d FROM db.orders GROUP BY status", "STDDEV"),
        (
            "SELECT status, sum(amount) / count(*) AS r FROM db.orders GROUP BY status",
            "is not a GROUP BY column",
        ),
        ("SELECT upper(status) AS s, count(*) AS n FROM db.orders GROUP BY upper(status)", "plain columns"),
        ("SELECT count(*) AS n FROM db.orders GROUP BY status", "are not selected"),
        ("SELECT * FROM db.log", "no primary key"),
        ("SELECT id FROM db.orders UNION SELECT id FROM db.users", "single SELECT"),
        ("SELECT id, rand() AS r FROM db.orders", "rand()"),
        ("SELECT * FROM db.orders ORDER BY id LIMIT 3", "ORDER"),
        ("SELECT * FROM (SELECT * FROM db.orders) x", "exactly one table"),
        ("SELECT id, row_number() OVER (ORDER BY id) AS r FROM db.orders", "window"),
    ],
)
def test_everything_else_refreshes_in_full_and_says_why(sql, why):
    analysis = _analyse(sql)
    assert analysis.shape is Shape.FULL and not analysis.incremental
    assert why in analysis.reason, analysis.reason


def test_source_names_skip_ctes():
    query = parse_one("WITH x AS (SELECT * FROM db.orders) SELECT * FROM x JOIN DB.Users u ON x.id = u.id")
    assert sorted(source_names(query)) == ["db.orders", "db.users"]
