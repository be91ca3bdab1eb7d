"""ALTER COLUMN ... TYPE widens a column as Iceberg allows; files written before keep their old type
and read promoted, merged, time-travelled, in the change feed and through every optimize."""

from __future__ import annotations

import decimal

import pytest

pytestmark = pytest.mark.spark

BIG = 5_000_000_000  # past an int's range: only a widened column holds it


def _rows(arctic, sql):
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


def test_widened_columns_read_old_and_new_files_everywhere(arctic):
    arctic.sql("CREATE TABLE db.w (id BIGINT, n INT, f FLOAT, d DECIMAL(5, 2), s STRING, PRIMARY KEY (id))")
    arctic.sql(
        "INSERT INTO db.w VALUES (1, 10, 1.5, 1.25, 'a'), (2, 20, 2.5, 2.50, 'b'), (3, 30, 3.5, 3.75, 'c')"
    )
    arctic.sql("CALL system.optimize(table => 'db.w', mode => 'full')")  # base files with the old types
    arctic.sql("UPDATE db.w SET n = 21 WHERE id = 2")  # a change file with the old types
    before = _rows(arctic, "SELECT * FROM db.w")
    arctic.sql("ALTER TABLE db.w ALTER COLUMN n TYPE BIGINT")
    arctic.sql("ALTER TABLE db.w ALTER COLUMN f TYPE DOUBLE")
    arctic.sql("ALTER TABLE db.w CHANGE COLUMN d d DECIMAL(12, 2)")  # Hive's spelling
    assert [(r[0], r[1]) for r in arctic.sql("DESCRIBE db.w").collect()][:4] == [
        ("id", "bigint"),
        ("n", "bigint"),
        ("f", "double"),
        ("d", "decimal(12,2)"),
    ]
    assert _rows(arctic, "SELECT * FROM db.w") == before

    arctic.sql(f"INSERT INTO db.w VALUES (4, {BIG}, 4.25, 1234567890.12, 'd')")
    arctic.sql(f"UPDATE db.w SET n = n + {BIG} WHERE id = 1")
    arctic.sql("DELETE FROM db.w WHERE id = 3")
    expected = [
        (1, 10 + BIG, 1.5, decimal.Decimal("1.25"), "a"),
        (2, 21, 2.5, decimal.Decimal("2.50"), "b"),
        (4, BIG, 4.25, decimal.Decimal("1234567890.12"), "d"),
    ]
    assert _rows(arctic, "SELECT * FROM db.w") == expected
    assert _rows(arctic, "SELECT * FROM db.w VERSION AS OF 2") == before  # an old version, with the new types
    changes = _rows(arctic, "SELECT id, n FROM db.w VERSION BETWEEN 2 AND 5")
    assert changes == [(1, 10 + BIG), (3, None), (4, BIG)]
    assert arctic.sql("SELECT sum(n) FROM db.w").collect()[0][0] == sum(r[1] for r in expected)
    for mode in ("minor", "major", "full"):
        arctic.sql(f"CALL system.optimize(table => 'db.w', mode => '{mode}')")
        assert _rows(arctic, "SELECT * FROM db.w") == expected, mode
    feed = (
        arctic.spark.read.format("arctic")
        .option("readChangeFeed", "true")
        .option("startingVersion", 3)
        .load("db.w")
        .select("id", "n", "_change_type")
        .collect()
    )
    assert sorted(map(tuple, feed)) == [(1, 10 + BIG, "upsert"), (3, None, "delete"), (4, BIG, "upsert")]


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        (
            "ALTER TABLE db.nw ALTER COLUMN id TYPE BIGINT",
            "Cannot change the type of primary key column 'id' of db.nw",
        ),
        (
            "ALTER TABLE db.nw ALTER COLUMN n TYPE STRING",
            "Cannot change column 'n' of db.nw from int to string: only int to bigint",
        ),
        (
            "ALTER TABLE db.nw ALTER COLUMN d TYPE DECIMAL(6, 3)",
            r"Cannot change column 'd' of db.nw from decimal\(5, 2\) to decimal\(6, 3\)",
        ),
        ("ALTER TABLE db.nw ALTER COLUMN nope TYPE BIGINT", "Column 'nope' does not exist in db.nw"),
        ("ALTER TABLE db.nw CHANGE COLUMN n m BIGINT", "CHANGE COLUMN n m renames and retypes at once"),
    ],
)
def test_a_type_change_iceberg_does_not_allow_is_one_line_and_changes_nothing(arctic, statement, message):
    arctic.sql("CREATE TABLE IF NOT EXISTS db.nw (id INT, n INT, d DECIMAL(5, 2), PRIMARY KEY (id))")
    schema = arctic.sql("DESCRIBE db.nw").collect()
    with pytest.raises(Exception, match=message):
        arctic.sql(statement)
    assert arctic.sql("DESCRIBE db.nw").collect() == schema


def test_a_widened_column_of_base_files_alone_reads_promoted(arctic):
    # After a full optimize a read has only base files, which a local table reads with Spark's own
    # Parquet reader: INT files under a BIGINT column, FLOAT under DOUBLE.
    arctic.sql("CREATE TABLE db.b (id BIGINT, n INT, f FLOAT, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.b VALUES (1, 10, 0.5), (2, 20, 1.5), (3, 30, 2.5)")
    arctic.sql("CALL system.optimize(table => 'db.b', mode => 'full')")
    arctic.sql("ALTER TABLE db.b ALTER COLUMN n TYPE BIGINT")
    arctic.sql("ALTER TABLE db.b ALTER COLUMN f TYPE DOUBLE")
    assert _rows(arctic, "SELECT * FROM db.b") == [(1, 10, 0.5), (2, 20, 1.5), (3, 30, 2.5)]
    assert _rows(arctic, "SELECT id FROM db.b WHERE n > 15 AND f < 2.0") == [(2,)]
    assert arctic.sql("SELECT sum(n), max(f) FROM db.b").collect()[0] == (60, 2.5)
