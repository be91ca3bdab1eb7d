"""Incremental reads: VERSION/TIMESTAMP BETWEEN, start exclusive and end inclusive, last change per key,
change data only (never what optimizing rewrote), append-only tables, and what is refused."""

from __future__ import annotations

import pytest

from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError

pytestmark = pytest.mark.spark

COLUMNS = "id, v, _change_type, _change_version"


def _rows(arctic, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


def _changes(arctic, clause: str, table: str = "db.t") -> list[tuple]:
    return _rows(arctic, f"SELECT {COLUMNS} FROM {table} {clause}")


@pytest.fixture
def keyed(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")  # 1
    arctic.sql("INSERT INTO db.t VALUES (2, 'B'), (3, 'c')")  # 2
    arctic.sql("DELETE FROM db.t WHERE id = 1")  # 3
    arctic.sql("INSERT INTO db.t VALUES (1, 'again'), (4, 'd')")  # 4
    arctic.sql("DELETE FROM db.t WHERE id = 4")  # 5
    return arctic


def test_version_edges_start_exclusive_end_inclusive(keyed):
    assert _changes(keyed, "VERSION BETWEEN 0 AND 1") == [(1, "a", "upsert", 1), (2, "b", "upsert", 1)]
    assert _changes(keyed, "VERSION BETWEEN 1 AND 2") == [(2, "B", "upsert", 2), (3, "c", "upsert", 2)]
    assert _changes(keyed, "VERSION BETWEEN 2 AND 3") == [(1, None, "delete", 3)]
    assert _changes(keyed, "VERSION BETWEEN 3 AND 3") == []
    # The last change per key wins: 1 deleted then inserted again, 4 inserted then deleted.
    assert _changes(keyed, "VERSION BETWEEN 2 AND 5") == [(1, "again", "upsert", 4), (4, None, "delete", 5)]
    assert _changes(keyed, "VERSION BETWEEN 0 AND 5") == [
        (1, "again", "upsert", 4),
        (2, "B", "upsert", 2),
        (3, "c", "upsert", 2),
        (4, None, "delete", 5),
    ]
    assert _changes(
        keyed, "FOR SYSTEM_VERSION BETWEEN get_latest_version('db.t', 3) AND get_latest_version('db.t')"
    ) == _changes(keyed, "VERSION BETWEEN 3 AND 5")
    assert keyed.sql("SELECT * FROM db.t VERSION BETWEEN 0 AND 1").columns == [
        "id",
        "v",
        "_change_type",
        "_change_version",
    ]


def test_timestamp_edges_match_commit_times(keyed):
    ms = {
        r[0]: r[1] for r in keyed.sql("SELECT version, unix_millis(committed_at) FROM db.t.history").collect()
    }
    at = {v: f"timestamp_millis({t})" for v, t in ms.items()}
    just_before = {v: f"timestamp_millis({t - 1})" for v, t in ms.items()}
    # A commit's own timestamp as the start excludes it; as the end includes it.
    assert _changes(keyed, f"TIMESTAMP BETWEEN {at[2]} AND {at[3]}") == _changes(
        keyed, "VERSION BETWEEN 2 AND 3"
    )
    assert _changes(keyed, f"TIMESTAMP BETWEEN {just_before[2]} AND {at[3]}") == _changes(
        keyed, "VERSION BETWEEN 1 AND 3"
    )
    assert _changes(keyed, f"FOR SYSTEM_TIME BETWEEN {at[2]} AND {just_before[4]}") == _changes(
        keyed, "VERSION BETWEEN 2 AND 3"
    )
    assert _changes(keyed, "TIMESTAMP BETWEEN get_latest_timestamp('db.t', 2) AND current_timestamp()") == [
        (4, None, "delete", 5)
    ]
    # Before the first commit of a table with its whole history: everything from the start.
    assert _changes(keyed, f"TIMESTAMP BETWEEN '2001-01-01' AND {at[1]}") == _changes(
        keyed, "VERSION BETWEEN 0 AND 1"
    )


def test_incremental_reads_ignore_what_optimizing_rewrote(keyed):
    before = _changes(keyed, "VERSION BETWEEN 0 AND 5")
    middle = _changes(keyed, "VERSION BETWEEN 2 AND 4")
    keyed.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    assert _rows(keyed, "SELECT * FROM db.t") == [(1, "again"), (2, "B"), (3, "c")]
    assert keyed.sql("SELECT count(*) FROM db.t.files WHERE store = 'base'").collect()[0][0] > 0
    assert keyed.sql("SELECT count(*) FROM db.t.partitions WHERE change_files > 0").collect()[0][0] == 0
    assert _changes(keyed, "VERSION BETWEEN 0 AND 5") == before
    assert _changes(keyed, "VERSION BETWEEN 2 AND 4") == middle
    keyed.sql("INSERT INTO db.t VALUES (3, 'C')")  # 6, after the optimize
    assert _changes(keyed, "VERSION BETWEEN 5 AND 6") == [(3, "C", "upsert", 6)]


def test_overwrite_in_the_range_is_refused_and_ctas_reads_as_upserts(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id)) AS SELECT 1 AS id, 'a' AS v")  # 1
    arctic.sql("INSERT INTO db.t VALUES (2, 'b')")  # 2
    assert _changes(arctic, "VERSION BETWEEN 0 AND 2") == [(1, "a", "upsert", 1), (2, "b", "upsert", 2)]
    arctic.sql("INSERT OVERWRITE db.t VALUES (5, 'e')")  # 3
    arctic.sql("INSERT INTO db.t VALUES (6, 'f')")  # 4
    with pytest.raises(
        VersionNotFoundError,
        match=r"crosses the OVERWRITE at version 3.*VERSION BETWEEN 3 AND 4, or startingVersion 4",
    ):
        arctic.sql("SELECT * FROM db.t VERSION BETWEEN 2 AND 4")
    assert _changes(arctic, "VERSION BETWEEN 3 AND 4") == [(6, "f", "upsert", 4)]


def test_append_only_tables_return_appended_rows(arctic):
    arctic.sql("CREATE TABLE db.log (id BIGINT, v STRING)")
    arctic.sql("INSERT INTO db.log VALUES (1, 'a'), (1, 'a')")
    arctic.sql("INSERT INTO db.log VALUES (2, 'b')")
    arctic.sql("INSERT INTO db.log VALUES (3, 'c')")
    v1, v2, v3 = [r[0] for r in arctic.sql("SELECT version FROM db.log.history ORDER BY version").collect()]
    assert _changes(arctic, f"VERSION BETWEEN {v1} AND {v3}", "db.log") == [
        (2, "b", "insert", v2),
        (3, "c", "insert", v3),
    ]
    assert _changes(arctic, f"VERSION BETWEEN 0 AND {v1}", "db.log") == [(1, "a", "insert", v1)] * 2
    arctic.sql("DELETE FROM db.log WHERE id = 2")
    with pytest.raises(VersionNotFoundError, match="crosses the DELETE"):
        arctic.sql(f"SELECT * FROM db.log VERSION BETWEEN {v1} AND get_latest_version('db.log')")


def test_incremental_read_feeds_a_merge(keyed):
    """The CDC pattern: apply each range's changes to a copy; it stays equal to the source."""
    keyed.sql("CREATE TABLE db.copy (id BIGINT, v STRING, PRIMARY KEY (id))")
    for start, end in [(0, 2), (2, 5)]:
        keyed.sql(
            f"MERGE INTO db.copy c USING (SELECT * FROM db.t VERSION BETWEEN {start} AND {end}) s "
            "ON c.id = s.id WHEN MATCHED AND s._change_type = 'delete' THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET v = s.v "
            "WHEN NOT MATCHED AND s._change_type = 'upsert' THEN INSERT (id, v) VALUES (s.id, s.v)"
        )
        assert _rows(keyed, "SELECT * FROM db.copy") == _rows(
            keyed, f"SELECT * FROM db.t VERSION AS OF {end}"
        )


def test_ranges_outside_the_history_are_clear_errors(keyed):
    with pytest.raises(VersionNotFoundError, match=r"versions 2 to 9 are outside.*newest version 5"):
        keyed.sql("SELECT * FROM db.t VERSION BETWEEN 2 AND 9")
    with pytest.raises(InvalidArgumentError, match="start version 4 is after the end version 2"):
        keyed.sql("SELECT * FROM db.t VERSION BETWEEN 4 AND 2")
    with pytest.raises(InvalidArgumentError, match="is after the end"):
        keyed.sql("SELECT * FROM db.t TIMESTAMP BETWEEN current_timestamp() AND '2001-01-01'")
