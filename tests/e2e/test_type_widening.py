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
            "ALTER TABLE db.nw ALTER COLUMN id TYPE STRING",
            "Cannot change primary key column 'id' of db.nw from int to string: a key column widens only "
            "from int to bigint",
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


def test_a_key_widened_from_int_keeps_every_row_in_its_tree_node(arctic):
    # Rows written before the widening were placed by the int's hash: every write path after it must
    # find them there (an upsert of an old key replaces its row, never adds a second one), and keys
    # beyond an int's range go wherever their long's hash says, for every reader alike.
    arctic.sql(
        "CREATE TABLE db.kw (id INT, v STRING, PRIMARY KEY (id)) "
        "TBLPROPERTIES ('base.file-index.hash-bucket' = '8', 'change.file-index.hash-bucket' = '4')"
    )
    model = {i: f"a{i}" for i in range(40)}
    arctic.sql("INSERT INTO db.kw VALUES " + ", ".join(f"({i}, 'a{i}')" for i in range(40)))
    arctic.sql("CALL system.optimize(table => 'db.kw', mode => 'full')")  # base files in 8 nodes
    arctic.sql("UPDATE db.kw SET v = 'u3' WHERE id = 3")  # a change file placed by the int's hash
    model[3] = "u3"
    arctic.sql("ALTER TABLE db.kw ALTER COLUMN id TYPE BIGINT")
    assert arctic.sql("DESCRIBE db.kw").collect()[0][1] == "bigint"

    def check(step: str) -> None:
        rows = _rows(arctic, "SELECT id, v FROM db.kw")
        assert rows == sorted(model.items()), step
        for key in (3, 7, BIG, BIG + 1):  # point lookups prune by the key's hash
            got = _rows(arctic, f"SELECT v FROM db.kw WHERE id = {key}")
            assert got == ([(model[key],)] if key in model else []), (step, key)
        got = arctic.spark.read.format("arctic").load("db.kw").where(f"id IN (5, {BIG})").select("id", "v")
        assert sorted(map(tuple, got.collect())) == sorted((k, model[k]) for k in (5, BIG) if k in model), (
            step
        )

    check("widened")
    arctic.sql(f"INSERT INTO db.kw VALUES (7, 'b7'), ({BIG}, 'big'), ({-BIG}, 'neg')")
    model.update({7: "b7", BIG: "big", -BIG: "neg"})
    arctic.sql(f"UPDATE db.kw SET v = 'u' || v WHERE id IN (8, {BIG})")
    model.update({8: "ua8", BIG: "ubig"})
    arctic.sql(f"DELETE FROM db.kw WHERE id IN (9, {-BIG})")
    del model[9], model[-BIG]
    arctic.sql(
        f"MERGE INTO db.kw t USING (SELECT * FROM VALUES (10, 'm10'), ({BIG + 1}, 'm1') AS s(id, v)) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    model.update({10: "m10", BIG + 1: "m1"})
    check("SQL writes")
    frame = arctic.spark.createDataFrame([(11, "w11"), (BIG, "wbig")], "id BIGINT, v STRING")
    frame.write.format("arctic").mode("append").save("db.kw")  # the Arrow writer's hash
    model.update({11: "w11", BIG: "wbig"})
    check("DataFrame write")
    for mode in ("minor", "major", "full"):
        arctic.sql(f"CALL system.optimize(table => 'db.kw', mode => '{mode}')")
        check(mode)
        arctic.sql(f"INSERT INTO db.kw VALUES (12, '{mode}')")
        model[12] = mode


def test_a_wider_key_written_with_merge_schema_widens_it_and_finds_the_old_rows(arctic):
    arctic.sql(
        "CREATE TABLE db.km (id INT, v STRING, PRIMARY KEY (id)) TBLPROPERTIES ('base.file-index.hash-bucket' = '4')"
    )
    arctic.sql("INSERT INTO db.km VALUES " + ", ".join(f"({i}, 'a')" for i in range(12)))
    arctic.sql("CALL system.optimize(table => 'db.km', mode => 'full')")
    frame = arctic.spark.createDataFrame(
        [(i, "b") for i in range(0, 12, 3)] + [(BIG, "big")], "id BIGINT, v STRING"
    )
    frame.write.format("arctic").mode("append").option("mergeSchema", "true").save("db.km")
    assert arctic.sql("DESCRIBE db.km").collect()[0][1] == "bigint"
    expected = sorted([(i, "b" if i % 3 == 0 else "a") for i in range(12)] + [(BIG, "big")])
    assert _rows(arctic, "SELECT id, v FROM db.km") == expected
    arctic.sql("CALL system.optimize(table => 'db.km', mode => 'full')")
    assert _rows(arctic, "SELECT id, v FROM db.km") == expected
    assert _rows(arctic, "SELECT v FROM db.km WHERE id IN (3, 4)") == [("a",), ("b",)]
