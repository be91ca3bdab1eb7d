"""Materialized views: every incremental shape equals its query run from scratch after random DML
(optimizing in between), a randomized model-style run, a refresh that dies before its commit and
runs again, and the one-line errors."""

from __future__ import annotations

import random

import pytest

from arctic_sql.errors import (
    InvalidArgumentError,
    NoSuchTableError,
    UnsupportedOperationError,
)

pytestmark = pytest.mark.spark

AGGREGATE = (
    "SELECT status, region, count(*) AS n, count(note) AS notes, sum(amount) AS total, avg(amount) AS mean "
    "FROM db.orders WHERE amount > 5 GROUP BY status, region"
)
GROUPS = (
    "SELECT status, min(amount) AS low, max(amount) AS high, count(DISTINCT region) AS regions "
    "FROM db.orders GROUP BY status"
)
FILTER = "SELECT id AS order_id, status, amount * 2 AS doubled FROM db.orders WHERE status <> 'cancelled'"


def _rows(df) -> list[tuple]:
    return sorted(
        (tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in df.collect()), key=repr
    )


def _visible(arctic, view: str) -> list[tuple]:
    """The view's rows as a query sees them (its hidden state columns left out)."""
    return _rows(arctic.sql(f"SELECT * FROM {view}"))


def _orders(arctic) -> None:
    arctic.sql(
        "CREATE TABLE db.orders (id BIGINT, status STRING NOT NULL, region STRING NOT NULL, "
        "amount BIGINT, note STRING, PRIMARY KEY (id))"
    )
    arctic.sql(
        "INSERT INTO db.orders VALUES (1, 'open', 'eu', 10, 'x'), (2, 'open', 'us', 20, NULL), "
        "(3, 'paid', 'eu', 3, 'y'), (4, 'cancelled', 'us', NULL, NULL)"
    )


STATUSES, REGIONS = ("open", "paid", "cancelled", "shipped"), ("eu", "us", "apac")


def _random_row(rng: random.Random, key: int) -> str:
    amount = rng.choice(["NULL", str(rng.randrange(0, 50))])
    note = rng.choice(["NULL", "'n'"])
    return f"({key}, '{rng.choice(STATUSES)}', '{rng.choice(REGIONS)}', {amount}, {note})"


def _random_dml(arctic, rng: random.Random, n: int = 6) -> None:
    for _ in range(n):
        roll = rng.random()
        if roll < 0.5:
            keys = rng.sample(range(1, 30), rng.randrange(1, 5))
            values = ", ".join(_random_row(rng, key) for key in keys)
            arctic.sql(f"INSERT INTO db.orders VALUES {values}")
        elif roll < 0.7:
            arctic.sql(f"DELETE FROM db.orders WHERE id % 7 = {rng.randrange(7)}")
        elif roll < 0.9:
            arctic.sql(
                f"UPDATE db.orders SET status = '{rng.choice(STATUSES)}' WHERE id % 5 = {rng.randrange(5)}"
            )
        else:
            arctic.sql("CALL system.optimize(table => 'db.orders', mode => 'full')")


@pytest.mark.parametrize("query", [AGGREGATE, GROUPS, FILTER], ids=["aggregate", "groups", "filter"])
def test_incremental_shapes_equal_the_query_from_scratch(arctic, query):
    _orders(arctic)
    arctic.sql(f"CREATE MATERIALIZED VIEW db.mv AS {query}")
    assert _visible(arctic, "db.mv") == _rows(arctic.sql(query))
    rng = random.Random(hash(query) % 1000)
    for _ in range(3):
        _random_dml(arctic, rng)
        arctic.sql("REFRESH MATERIALIZED VIEW db.mv")
        assert _visible(arctic, "db.mv") == _rows(arctic.sql(query))
        last = dict(arctic.sql("DESCRIBE MATERIALIZED VIEW db.mv").collect())
        assert last["refresh"] == "incremental"
        assert last["last refresh"].startswith("incremental"), last


def test_describe_says_why_a_view_refreshes_in_full(arctic):
    _orders(arctic)
    arctic.sql("CREATE TABLE db.users (id BIGINT, name STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.users VALUES (1, 'a')")
    query = "SELECT o.id, u.name FROM db.orders o JOIN db.users u ON o.id = u.id"
    arctic.sql(f"CREATE MATERIALIZED VIEW db.joined AS {query}")
    info = dict(arctic.sql("DESCRIBE MATERIALIZED VIEW db.joined").collect())
    assert info["refresh"] == "full" and "joins" in info["plan"]
    arctic.sql("INSERT INTO db.users VALUES (2, 'b')")
    arctic.sql("REFRESH MATERIALIZED VIEW db.joined")
    assert _rows(arctic.sql("SELECT * FROM db.joined")) == _rows(arctic.sql(query))
    info = dict(arctic.sql("DESCRIBE MATERIALIZED VIEW db.joined").collect())
    assert info["last refresh"].startswith("full: joins")
    assert '"db.users": 2' in info["source versions"]


def test_view_is_a_keyed_table_with_time_travel(arctic):
    _orders(arctic)
    arctic.sql(f"CREATE MATERIALIZED VIEW db.mv AS {AGGREGATE}")
    first = _visible(arctic, "db.mv")
    arctic.sql("INSERT INTO db.orders VALUES (9, 'open', 'eu', 100, NULL)")
    arctic.sql("REFRESH MATERIALIZED VIEW db.mv")
    described = {r[0]: r for r in arctic.sql("DESCRIBE EXTENDED db.mv").collect()}
    assert described["Primary Key"][1] == "status, region"
    old = arctic.sql("SELECT * FROM db.mv VERSION AS OF 1")
    assert old.columns == ["status", "region", "n", "notes", "total", "mean"]
    assert _rows(old) == first
    assert [r.viewName for r in arctic.sql("SHOW MATERIALIZED VIEWS IN db").collect()] == ["mv"]


def test_randomized_rounds_match_the_query(arctic):
    """A few rounds of random DML and optimizing; after each refresh every view equals its query."""
    _orders(arctic)
    queries = {"a": AGGREGATE, "g": GROUPS, "f": FILTER}
    for name, query in queries.items():
        arctic.sql(f"CREATE MATERIALIZED VIEW db.{name} AS {query}")
    rng = random.Random(7)
    for round_ in range(3):
        _random_dml(arctic, rng, n=4)
        for name, query in queries.items():
            if rng.random() < 0.7 or round_ == 2:  # some views skip a round: longer ranges next time
                arctic.sql(f"REFRESH MATERIALIZED VIEW db.{name}")
                assert _visible(arctic, f"db.{name}") == _rows(arctic.sql(query)), (round_, name)


def test_refresh_that_dies_before_its_commit_runs_again_exactly_once(arctic, monkeypatch):
    from arctic_sql.faults import InjectedFault

    _orders(arctic)
    arctic.sql(f"CREATE MATERIALIZED VIEW db.mv AS {AGGREGATE}")
    before = _visible(arctic, "db.mv")
    arctic.sql("INSERT INTO db.orders VALUES (10, 'open', 'eu', 7, 'z'), (11, 'paid', 'us', 8, NULL)")
    arctic.sql("DELETE FROM db.orders WHERE id = 1")
    monkeypatch.setenv("ARCTIC_FAULT", "raise:before-commit")
    with pytest.raises(InjectedFault):
        arctic.sql("REFRESH MATERIALIZED VIEW db.mv")
    monkeypatch.delenv("ARCTIC_FAULT")
    assert _visible(arctic, "db.mv") == before  # nothing of the dead refresh is visible
    arctic.sql("REFRESH MATERIALIZED VIEW db.mv")
    arctic.sql("REFRESH MATERIALIZED VIEW db.mv")  # nothing new: commits nothing, changes nothing
    assert _visible(arctic, "db.mv") == _rows(arctic.sql(AGGREGATE))


def test_expired_history_falls_back_to_a_full_refresh(arctic):
    _orders(arctic)
    arctic.sql(f"CREATE MATERIALIZED VIEW db.mv AS {AGGREGATE}")
    arctic.sql("INSERT INTO db.orders VALUES (20, 'open', 'eu', 30, NULL)")
    arctic.sql(
        "INSERT OVERWRITE db.orders SELECT * FROM db.orders WHERE id <> 2"
    )  # replaces rows: no per-key changes
    arctic.sql("REFRESH MATERIALIZED VIEW db.mv")
    assert _visible(arctic, "db.mv") == _rows(arctic.sql(AGGREGATE))
    info = dict(arctic.sql("DESCRIBE MATERIALIZED VIEW db.mv").collect())
    assert info["last refresh"].startswith("full: the changes since the last refresh are not readable")


def _error(action) -> Exception:
    from arctic_sql.spark import translate

    with pytest.raises(Exception) as caught:
        action()
    return translate(caught.value)


def test_bad_input_is_refused_in_one_line_and_changes_nothing(arctic):
    _orders(arctic)
    arctic.sql("CREATE TABLE db.plain (id BIGINT) USING parquet")
    try:
        cases = [
            ("CREATE MATERIALIZED VIEW db.mv AS SELECT * FROM db.nope", NoSuchTableError, "db.nope"),
            (
                "CREATE MATERIALIZED VIEW db.mv AS SELECT * FROM db.plain",
                UnsupportedOperationError,
                "not an arctic table",
            ),
            ("DROP TABLE db.mv0", InvalidArgumentError, "DROP MATERIALIZED VIEW"),
            ("DROP MATERIALIZED VIEW db.orders", InvalidArgumentError, "use DROP TABLE"),
            ("REFRESH MATERIALIZED VIEW db.orders", InvalidArgumentError, "not a materialized view"),
            ("REFRESH MATERIALIZED VIEW db.nothing", NoSuchTableError, "db.nothing"),
            ("DELETE FROM db.mv0", InvalidArgumentError, "db.mv0 is a materialized view"),
            ("TRUNCATE TABLE db.mv0", InvalidArgumentError, "its rows change only by REFRESH"),
        ]
        arctic.sql(f"CREATE MATERIALIZED VIEW db.mv0 AS {FILTER}")
        rows = sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.mv0").collect())
        tables = sorted(r.tableName for r in arctic.sql("SHOW TABLES IN db").collect())
        for statement, kind, words in cases:
            error = _error(lambda s=statement: arctic.sql(s))
            assert isinstance(error, kind), (statement, error)
            assert words in str(error) and "\n" not in str(error), (statement, error)
        assert sorted(r.tableName for r in arctic.sql("SHOW TABLES IN db").collect()) == tables
        assert sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.mv0").collect()) == rows
        arctic.sql("DROP MATERIALIZED VIEW db.mv0")
        arctic.sql("DROP MATERIALIZED VIEW IF EXISTS db.mv0")
        assert "mv0" not in {r.tableName for r in arctic.sql("SHOW TABLES IN db").collect()}
    finally:  # a Spark table outlives the test's warehouse: other tests list the database
        arctic.spark.sql("DROP TABLE IF EXISTS db.plain")
