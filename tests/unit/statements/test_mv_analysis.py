"""Which materialized-view queries refresh incrementally, and why the others do not (no Spark)."""

from __future__ import annotations

import pytest

from arctic_sql.parser import parse_one
from arctic_sql.statements.mv_analysis import (
    Kind,
    Shape,
    analyse,
    group_key,
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
    # keyed by the hidden group key (a group column may be NULL), shown as its group columns
    assert analysis.key == ("__mv_group",) and analysis.shown_key == ("status", "region")
    assert analysis.hidden_columns[0] == "__mv_group"
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
    assert analysis.shape is Shape.GROUPS and analysis.shown_key == ("status",)
    assert analysis.state_columns == () and analysis.hidden_columns == ("__mv_group",)


def test_the_group_key_keeps_nulls_apart_from_every_value():
    """The key's SQL keeps NULL fields and fixes the time zone and the timestamp precision: every
    session encodes a group alike, and NULL never meets the string 'null'."""
    sql = group_key(["status", "re`gion"])
    assert sql.startswith("to_json(named_struct('0', `status`, '1', `re``gion`)")
    assert "'ignoreNullFields', 'false'" in sql and "'timeZone', 'UTC'" in sql and "SSSSSS" in sql


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("SELECT o.id, u.name FROM db.orders o JOIN db.users u ON o.note = u.name", "each key column of"),
        ("SELECT o.id, u.name FROM db.orders o FULL JOIN db.users u ON o.id = u.id", "not a FULL join"),
        ("SELECT u.name FROM db.orders o JOIN db.users u ON o.id = u.id", "left key column(s) id"),
        ("SELECT * FROM db.orders o JOIN db.users u ON o.id = u.id", "selects *"),
        (
            "SELECT o.status, count(*) AS n FROM db.orders o JOIN db.users u ON o.id = u.id GROUP BY o.status",
            "GROUP BY",
        ),
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


@pytest.mark.parametrize("join", ["JOIN", "INNER JOIN", "LEFT JOIN", "LEFT OUTER JOIN"])
def test_a_join_on_the_right_key_refreshes_by_left_rows(join):
    """Each left row joins one right row at most (ON covers the right's key, either way round, other
    conditions allowed): keyed by the left's key under its output name."""
    analysis = _analyse(
        f"SELECT o.id AS order_id, o.amount, u.name FROM db.orders o {join} db.users u "
        "ON u.id = o.user_id AND u.name <> 'x' WHERE o.amount > 1"
    )
    assert analysis.shape is Shape.JOIN, analysis.reason
    assert analysis.key == ("order_id",) and analysis.source_key == ("id",)
    assert analysis.join is not None
    assert (analysis.join.left, analysis.join.right, analysis.join.on) == (
        "db.orders",
        "db.users",
        (("user_id", "id"),),
    )
