"""Time travel: every AS OF syntax, in every position a table can stand, on keyed and append-only
tables; out-of-range errors; get_latest_version/get_latest_timestamp; DESCRIBE HISTORY."""

from __future__ import annotations

import pytest

from arctic_sql.errors import InvalidArgumentError, NoSuchTableError, VersionNotFoundError

pytestmark = pytest.mark.spark

STATES = {
    1: [(1, "a"), (2, "b")],
    2: [(1, "a"), (2, "B"), (3, "c")],
    3: [(2, "B"), (3, "c")],
}


def _rows(arctic, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


@pytest.fixture
def keyed(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")
    arctic.sql("INSERT INTO db.t VALUES (2, 'B'), (3, 'c')")
    arctic.sql("DELETE FROM db.t WHERE id = 1")
    return arctic


def _commit_ms(arctic, table: str) -> dict[int, int]:
    rows = arctic.sql(f"SELECT version, unix_millis(committed_at) FROM {table}.history").collect()
    return {r[0]: r[1] for r in rows}


def test_every_as_of_syntax_reads_the_version(keyed):
    ms = _commit_ms(keyed, "db.t")
    assert sorted(ms) == [1, 2, 3]
    for version, expected in STATES.items():
        assert _rows(keyed, f"SELECT * FROM db.t VERSION AS OF {version}") == expected
        assert _rows(keyed, f"SELECT * FROM db.t FOR SYSTEM_VERSION AS OF {version}") == expected
        assert _rows(keyed, f"SELECT * FROM db.t VERSION AS OF '{version}'") == expected
        at = f"timestamp_millis({ms[version]})"
        assert _rows(keyed, f"SELECT * FROM db.t TIMESTAMP AS OF {at}") == expected
        assert _rows(keyed, f"SELECT * FROM db.t FOR SYSTEM_TIME AS OF {at}") == expected
        # One millisecond before a commit is the version before it.
        if version > 1:
            before = f"timestamp_millis({ms[version] - 1})"
            assert _rows(keyed, f"SELECT * FROM db.t TIMESTAMP AS OF {before}") == STATES[version - 1]
    # A timestamp as a string (session time zone) and as an expression.
    assert _rows(keyed, "SELECT * FROM db.t TIMESTAMP AS OF current_timestamp()") == STATES[3]
    text = keyed.sql(f"SELECT CAST(timestamp_millis({ms[2]}) AS STRING)").collect()[0][0]
    assert _rows(keyed, f"SELECT * FROM db.t TIMESTAMP AS OF '{text}'") == STATES[2]


def test_get_latest_functions_in_clauses_and_expressions(keyed):
    ms = _commit_ms(keyed, "db.t")
    assert _rows(keyed, "SELECT * FROM db.t VERSION AS OF get_latest_version('db.t', 2)") == STATES[2]
    assert _rows(keyed, "SELECT * FROM db.t VERSION AS OF get_latest_version('db.t') - 2") == STATES[1]
    assert _rows(keyed, "SELECT * FROM db.t TIMESTAMP AS OF get_latest_timestamp('db.t', 3)") == STATES[1]
    row = keyed.sql(
        "SELECT get_latest_version('db.t') AS v, get_latest_version('db.t', 3) AS first, "
        "unix_millis(get_latest_timestamp('db.t', 2)) AS ts"
    ).collect()[0]
    assert (row.v, row.first, row.ts) == (3, 1, ms[2])
    assert _rows(keyed, "SELECT id FROM db.t WHERE id < get_latest_version('db.t')") == [(2,)]
    with pytest.raises(VersionNotFoundError, match="3 retained versions, not 4"):
        keyed.sql("SELECT get_latest_version('db.t', 4)")
    with pytest.raises(InvalidArgumentError, match="must be 1 or more"):
        keyed.sql("SELECT get_latest_version('db.t', 0)")
    with pytest.raises(NoSuchTableError):
        keyed.sql("SELECT get_latest_version('db.nope')")


def test_time_travel_in_joins_subqueries_ctas_insert_and_merge_sources(keyed):
    joined = _rows(keyed, "SELECT a.id, a.v, b.v FROM db.t a JOIN db.t VERSION AS OF 1 b ON a.id = b.id")
    assert joined == [(2, "B", "b")]
    sub = _rows(
        keyed, "SELECT count(*) FROM (SELECT * FROM db.t FOR SYSTEM_VERSION AS OF 2) s WHERE s.id > 1"
    )
    assert sub == [(2,)]
    cte = _rows(
        keyed,
        "WITH old AS (SELECT * FROM db.t VERSION AS OF 1) SELECT id FROM old WHERE id IN "
        "(SELECT id FROM db.t TIMESTAMP AS OF get_latest_timestamp('db.t', 2))",
    )
    assert cte == [(1,), (2,)]
    keyed.sql(
        "CREATE TABLE db.copy (id BIGINT, v STRING, PRIMARY KEY (id)) AS SELECT * FROM db.t VERSION AS OF 1"
    )
    assert _rows(keyed, "SELECT * FROM db.copy") == STATES[1]
    keyed.sql("CREATE TABLE db.plain AS SELECT * FROM db.t VERSION AS OF 2")
    assert _rows(keyed, "SELECT * FROM db.plain") == STATES[2]
    keyed.sql("INSERT INTO db.copy SELECT id + 10, v FROM db.t VERSION AS OF get_latest_version('db.t', 2)")
    assert len(_rows(keyed, "SELECT * FROM db.copy")) == 5
    keyed.sql(
        "MERGE INTO db.copy AS c USING (SELECT * FROM db.t VERSION AS OF 2) AS s ON c.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
    )
    assert _rows(keyed, "SELECT * FROM db.copy WHERE id < 10") == STATES[2]


def test_append_only_table_travels_by_its_own_versions(arctic):
    arctic.sql("CREATE TABLE db.log (id BIGINT, v STRING)")
    arctic.sql("INSERT INTO db.log VALUES (1, 'a')")
    arctic.sql("INSERT INTO db.log VALUES (2, 'b')")
    arctic.sql("DELETE FROM db.log WHERE id = 1")
    versions = [r[0] for r in arctic.sql("SELECT version FROM db.log.history ORDER BY version").collect()]
    assert len(versions) == 3
    expected = [[(1, "a")], [(1, "a"), (2, "b")], [(2, "b")]]
    ms = _commit_ms(arctic, "db.log")
    for version, rows in zip(versions, expected, strict=True):
        assert _rows(arctic, f"SELECT * FROM db.log VERSION AS OF {version}") == rows
        assert (
            _rows(arctic, f"SELECT * FROM db.log FOR SYSTEM_TIME AS OF timestamp_millis({ms[version]})")
            == rows
        )
    assert _rows(arctic, "SELECT * FROM db.log VERSION AS OF get_latest_version('db.log', 2)") == expected[1]


def test_versions_and_timestamps_outside_the_history_are_clear_errors(keyed):
    names_both_ends = r"oldest version 1 at .*newest version 3 at"
    with pytest.raises(VersionNotFoundError, match=rf"Version 9 of db.t does not exist.*{names_both_ends}"):
        keyed.sql("SELECT * FROM db.t VERSION AS OF 9")
    with pytest.raises(VersionNotFoundError, match=names_both_ends):
        keyed.sql("SELECT * FROM db.t FOR SYSTEM_VERSION AS OF -1")
    with pytest.raises(VersionNotFoundError, match=rf"before the oldest retained commit.*{names_both_ends}"):
        keyed.sql("SELECT * FROM db.t TIMESTAMP AS OF '2001-02-03 04:05:06'")
    with pytest.raises(InvalidArgumentError, match="needs a version number or a tag's name, got '3x'"):
        keyed.sql("SELECT * FROM db.t VERSION AS OF '3x'")
    with pytest.raises(
        VersionNotFoundError, match=r"^Tag 'three' of db.t does not exist \(tags: none; see db.t.refs\)"
    ):
        keyed.sql("SELECT * FROM db.t VERSION AS OF 'three'")
    with pytest.raises(InvalidArgumentError, match="needs a timestamp"):
        keyed.sql("SELECT * FROM db.t TIMESTAMP AS OF 'yesterday-ish'")
    with pytest.raises(InvalidArgumentError, match="no versions to travel to"):
        keyed.sql("SELECT * FROM db.t.history VERSION AS OF 1")


def test_describe_history_is_the_history_table(keyed):
    described = keyed.sql("DESCRIBE HISTORY db.t")
    assert described.columns == keyed.sql("SELECT * FROM db.t.history").columns
    assert [tuple(r)[:3] for r in described.collect()] == [
        tuple(r)[:3] for r in keyed.sql("SELECT * FROM db.t.history").collect()
    ]
    keyed.sql("USE db")
    assert [r.operation for r in keyed.sql("DESC HISTORY t").collect()] == ["insert", "insert", "delete"]
    with pytest.raises(NoSuchTableError):
        keyed.sql("DESCRIBE HISTORY db.missing")
