"""Schema evolution on write: ``mergeSchema`` (or ``write.schema.auto-merge``) adds the columns a write
carries and widens the types it carries wider, in both stores, before any task writes; without it, or
for a write refused on other grounds, nothing changes."""

from __future__ import annotations

import json

import pytest

from arctic_sql.errors import InvalidArgumentError, UnsupportedOperationError

pytestmark = pytest.mark.spark

BIG = 5_000_000_000


def _rows(arctic, table="db.e"):
    return sorted(tuple(r) for r in arctic.sql(f"SELECT * FROM {table}").collect())


def _columns(arctic, table="db.e"):
    return [
        (r[0], r[1]) for r in arctic.sql(f"DESCRIBE {table}").collect() if r[0] and not r[0].startswith("#")
    ]


def _write(arctic, rows, schema, table="db.e", **options):
    writer = arctic.spark.createDataFrame(rows, schema).write.format("arctic").mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(table)


@pytest.fixture
def evolving(arctic):
    arctic.sql("CREATE TABLE db.e (id BIGINT, n INT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT INTO db.e VALUES (1, 10, 'a'), (2, 20, 'b')")
    return arctic


def test_merge_schema_adds_columns_and_widens_types_in_both_stores(evolving):
    arctic = evolving
    _write(
        arctic,
        [(2, BIG, "B", 2.5), (3, 30, "c", 3.5)],
        "id long, n long, v string, score double",
        mergeSchema="true",
    )
    assert _columns(arctic) == [("id", "bigint"), ("n", "bigint"), ("v", "string"), ("score", "double")]
    assert _rows(arctic) == [(1, 10, "a", None), (2, BIG, "B", 2.5), (3, 30, "c", 3.5)]
    table = arctic.table("db.e")
    assert (
        table.change.schema().find_field("score").field_type
        == table.base.schema().find_field("score").field_type
    )
    # Later writes may leave the new column out (NULL for an upsert) or delete by key alone.
    _write(
        arctic,
        [(4, 40, "d", "upsert"), (1, None, None, "delete")],
        "id long, n long, v string, _change_type string",
    )
    arctic.sql("CALL system.optimize(table => 'db.e', mode => 'full')")
    assert _rows(arctic) == [(2, BIG, "B", 2.5), (3, 30, "c", 3.5), (4, 40, "d", None)]
    assert _rows(arctic, "db.e VERSION AS OF 1") == [(1, 10, "a", None), (2, 20, "b", None)]


def test_without_merge_schema_or_with_a_bad_write_nothing_changes(evolving):
    arctic = evolving
    before, columns = _rows(arctic), _columns(arctic)
    with pytest.raises(Exception, match="Column 'score' is not a column of db.e"):
        _write(arctic, [(3, 30, "c", 3.5)], "id long, n int, v string, score double")
    with pytest.raises(
        Exception, match="lack its primary key column 'id'"
    ):  # checked before any column is added
        _write(arctic, [(30, "c", 3.5)], "n int, v string, score double", mergeSchema="true")
    with pytest.raises(
        Exception, match="Column 'n' is string, which cannot be written into db.e's int column 'n'"
    ):
        _write(arctic, [(3, "30", "c", 3.5)], "id long, n string, v string, score double", mergeSchema="true")
    with pytest.raises(Exception, match="Option mergeSchema must be true or false, got 'yes'"):
        _write(arctic, [(3, 30, "c", 3.5)], "id long, n int, v string, score double", mergeSchema="yes")
    assert _rows(arctic) == before and _columns(arctic) == columns


def test_the_table_property_makes_it_the_default_and_the_option_overrides_it(evolving):
    arctic = evolving
    arctic.sql("ALTER TABLE db.e SET TBLPROPERTIES ('write.schema.auto-merge' = 'true')")
    _write(arctic, [(3, 30, "c", True)], "id long, n int, v string, flag boolean")
    with pytest.raises(Exception, match="Column 'other' is not a column of db.e"):
        _write(arctic, [(4, 40, "d", 1)], "id long, n int, v string, other int", mergeSchema="false")
    assert _columns(arctic)[-1] == ("flag", "boolean")
    assert _rows(arctic)[-1] == (3, 30, "c", True)


def test_a_stream_whose_source_gained_a_column_writes_it_with_merge_schema(evolving, tmp_path):
    arctic = evolving
    source = tmp_path / "source"
    source.mkdir()
    (source / "1.json").write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"id": 2, "n": 21, "v": "b2", "region": "eu"},
                {"id": 5, "n": 50, "v": "e", "region": "us"},
            ]
        )
    )
    stream = arctic.spark.readStream.schema("id long, n int, v string, region string").json(str(source))
    query = (
        stream.writeStream.format("arctic")
        .option("mergeSchema", "true")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start("db.e")
    )
    query.awaitTermination()
    assert _rows(arctic) == [(1, 10, "a", None), (2, 21, "b2", "eu"), (5, 50, "e", "us")]


def test_merge_with_schema_evolution_takes_the_source_columns_of_star_clauses_only(evolving):
    arctic = evolving
    arctic.spark.createDataFrame(
        [(2, BIG, "B", "eu"), (3, 30, "c", "us")], "id long, n long, v string, region string"
    ).createOrReplaceTempView("src")
    plain = (
        "MERGE INTO db.e t USING src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT (id, n, v) VALUES (s.id, 0, s.v)"
    )
    arctic.sql(plain.replace("MERGE INTO", "MERGE WITH SCHEMA EVOLUTION INTO"))  # listed: nothing evolves
    assert _columns(arctic) == [("id", "bigint"), ("n", "int"), ("v", "string")]
    assert _rows(arctic) == [(1, 10, "a"), (2, 20, "B"), (3, 0, "c")]

    # Stars without evolution: the extra column is ignored, and a too-wide value fails as a cast does.
    stars = "MERGE INTO db.e t USING {} s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    arctic.sql(stars.format("(SELECT 3 AS id, 31 AS n, 'c3' AS v, 'us' AS region)"))
    assert _columns(arctic) == [("id", "bigint"), ("n", "int"), ("v", "string")]
    with pytest.raises(Exception, match="CAST_OVERFLOW"):
        arctic.sql(stars.format("src"))
    assert _rows(arctic) == [(1, 10, "a"), (2, 20, "B"), (3, 31, "c3")]

    arctic.sql(
        "MERGE WITH SCHEMA EVOLUTION INTO db.e t USING src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    assert _columns(arctic) == [("id", "bigint"), ("n", "bigint"), ("v", "string"), ("region", "string")]
    assert _rows(arctic) == [(1, 10, "a", None), (2, BIG, "B", "eu"), (3, 30, "c", "us")]


def test_a_narrower_source_leaves_the_columns_it_lacks_as_they_were_for_updates(evolving):
    # Delta's rule under schema evolution: UPDATE SET * keeps the target's value of a column the
    # source lacks, INSERT * writes NULL there; the same MERGE without evolution cannot resolve it.
    arctic = evolving
    narrow = "(SELECT * FROM VALUES (2, 'B2', true), (4, 'd', false) AS s(id, v, vip))"
    stars = (
        "MERGE {} INTO db.e t USING {} s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    with pytest.raises(Exception, match=r"UNRESOLVED_COLUMN.*`n`"):
        arctic.sql(stars.format("", narrow))
    assert _rows(arctic) == [(1, 10, "a"), (2, 20, "b")]
    arctic.sql(stars.format("WITH SCHEMA EVOLUTION", narrow))
    assert _columns(arctic) == [("id", "bigint"), ("n", "int"), ("v", "string"), ("vip", "boolean")]
    assert _rows(arctic) == [(1, 10, "a", None), (2, 20, "B2", True), (4, None, "d", False)]
    # A blind upsert (stars only, no condition) must read the target too when the source is narrower.
    arctic.sql(stars.format("WITH SCHEMA EVOLUTION", "(SELECT 1 AS id, 'a1' AS v)"))
    assert _rows(arctic) == [(1, 10, "a1", None), (2, 20, "B2", True), (4, None, "d", False)]


def test_insert_with_schema_evolution_by_position_by_name_and_by_column_list(evolving):
    arctic = evolving
    arctic.sql(f"INSERT WITH SCHEMA EVOLUTION INTO db.e SELECT 3, {BIG}, 'c', 'eu' AS region")  # past the end
    assert _columns(arctic) == [("id", "bigint"), ("n", "bigint"), ("v", "string"), ("region", "string")]
    arctic.sql("INSERT WITH SCHEMA EVOLUTION INTO db.e BY NAME SELECT 'd' AS v, 4 AS id, true AS vip")
    arctic.sql("INSERT WITH SCHEMA EVOLUTION INTO db.e (id, score) VALUES (5, 0.5D)")
    assert _columns(arctic)[-2:] == [("vip", "boolean"), ("score", "double")]
    assert _rows(arctic) == [
        (1, 10, "a", None, None, None),
        (2, 20, "b", None, None, None),
        (3, BIG, "c", "eu", None, None),
        (4, None, "d", None, True, None),
        (5, None, None, None, None, 0.5),
    ]
    columns = _columns(arctic)
    with pytest.raises(Exception, match="has 2 values per row but 3 target columns"):  # checked first
        arctic.sql("INSERT WITH SCHEMA EVOLUTION INTO db.e (id, v, extra) SELECT 6, 'f'")
    with pytest.raises(
        Exception, match="Column 'extra' is not|Column 'extra' does not exist"
    ):  # no evolution asked
        arctic.sql("INSERT INTO db.e (id, extra) VALUES (6, 1)")
    assert _columns(arctic) == columns and len(_rows(arctic)) == 5


def test_fields_of_structs_are_added_renamed_and_dropped_in_both_stores(arctic):
    """ADD COLUMNS (st.z ...), RENAME COLUMN st.a TO aa, DROP COLUMN st.b: old files read by field id
    in the merge, after optimizing, in time travel and in the change feed; the change store follows."""
    arctic.sql(
        "CREATE TABLE db.n (id BIGINT, st STRUCT<a: BIGINT, b: STRING, inner: STRUCT<c: INT>>, PRIMARY KEY (id))"
    )
    arctic.sql(
        "INSERT INTO db.n VALUES (1, named_struct('a', 1, 'b', 'x', 'inner', named_struct('c', 10))), "
        "(2, named_struct('a', 2, 'b', 'y', 'inner', named_struct('c', 20)))"
    )
    arctic.sql("CALL system.optimize(table => 'db.n', mode => 'full')")
    arctic.sql("INSERT INTO db.n VALUES (3, named_struct('a', 3, 'b', 'z', 'inner', named_struct('c', 30)))")
    arctic.sql("ALTER TABLE db.n ADD COLUMNS (st.z INT, st.inner.d STRING)")
    arctic.sql("ALTER TABLE db.n RENAME COLUMN st.a TO aa")
    arctic.sql("ALTER TABLE db.n DROP COLUMN st.b")
    arctic.sql(
        "INSERT INTO db.n VALUES (4, named_struct('aa', 4, 'inner', named_struct('c', 40, 'd', 'q'), 'z', 44))"
    )
    arctic.sql(
        "UPDATE db.n SET st = named_struct('aa', 20, 'inner', named_struct('c', 21, 'd', 'u'), 'z', 2) WHERE id = 2"
    )

    def rows(sql: str) -> list[tuple]:
        return sorted((r["id"], r["st"].asDict(recursive=True)) for r in arctic.sql(sql).collect())

    def st(aa, c, d, z) -> dict:
        return {"aa": aa, "inner": {"c": c, "d": d}, "z": z}

    expected = [
        (1, st(1, 10, None, None)),
        (2, st(20, 21, "u", 2)),
        (3, st(3, 30, None, None)),
        (4, st(4, 40, "q", 44)),
    ]
    assert rows("SELECT id, st FROM db.n") == expected
    assert [r["id"] for r in arctic.sql("SELECT id FROM db.n WHERE st.aa >= 4 ORDER BY id").collect()] == [
        2,
        4,
    ]
    assert rows("SELECT id, st FROM db.n VERSION AS OF 2") == [
        (1, st(1, 10, None, None)),
        (2, st(2, 20, None, None)),
        (3, st(3, 30, None, None)),
    ]
    changed = arctic.sql("SELECT id, st, _change_type FROM db.n VERSION BETWEEN 2 AND 4").collect()
    assert sorted((r["id"], r["st"]["aa"], r["_change_type"]) for r in changed) == [
        (2, 20, "upsert"),
        (4, 4, "upsert"),
    ]
    table = arctic.table("db.n")
    assert (
        table.change.schema().find_field("st").field_type == table.base.schema().find_field("st").field_type
    )
    arctic.sql("CALL system.optimize(table => 'db.n', mode => 'full')")
    assert rows("SELECT id, st FROM db.n") == expected
    with pytest.raises(InvalidArgumentError, match=r"^Cannot drop every field of struct st.inner of db.n"):
        arctic.sql("ALTER TABLE db.n DROP COLUMNS (st.inner.c, st.inner.d)")
    with pytest.raises(InvalidArgumentError, match=r"^Column 'st.z' already exists in db.n"):
        arctic.sql("ALTER TABLE db.n RENAME COLUMN st.aa TO z")
    # a nested field's type: one arctic line (sqlglot made it a raw command that reached Spark)
    for statement in (
        "ALTER TABLE db.n ALTER COLUMN st.aa TYPE BIGINT",
        "ALTER TABLE db.n ALTER st.inner.c TYPE BIGINT",
    ):
        with pytest.raises(
            UnsupportedOperationError,
            match=r"^Cannot change the type of nested field st\.(aa|inner\.c) of db\.n",
        ):
            arctic.sql(statement)
    assert table.base.schema().find_field("st") == arctic.table("db.n").base.schema().find_field("st")


def test_a_narrower_dataframe_or_stream_write_keeps_the_stored_columns_of_existing_keys(evolving, tmp_path):
    """As MERGE's UPDATE SET * with a narrower source: a key the table holds keeps its stored values
    of the columns the rows lack, a new key gets NULL there; with mergeSchema too."""
    arctic = evolving
    _write(arctic, [(2, "b2"), (3, "c")], "id long, v string")
    assert _rows(arctic) == [(1, 10, "a"), (2, 20, "b2"), (3, None, "c")]
    _write(arctic, [(1, "eu"), (4, "us")], "id long, region string", mergeSchema="true")
    assert _rows(arctic) == [
        (1, 10, "a", "eu"),
        (2, 20, "b2", None),
        (3, None, "c", None),
        (4, None, None, "us"),
    ]
    # a delete in the same write is still a delete; the rows' own NULLs are written as given
    _write(
        arctic,
        [(1, None, "update"), (2, None, "delete"), (5, "x", "insert")],
        "id long, v string, _change_type string",
    )
    assert _rows(arctic) == [
        (1, 10, None, "eu"),
        (3, None, "c", None),
        (4, None, None, "us"),
        (5, None, "x", None),
    ]
    source = tmp_path / "in"
    source.mkdir()
    (source / "1.json").write_text('{"id": 3, "n": 33}\n{"id": 6, "n": 60}\n')
    query = (
        arctic.spark.readStream.schema("id long, n int")
        .json(str(source))
        .writeStream.format("arctic")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start("db.e")
    )
    query.awaitTermination()
    assert _rows(arctic) == [
        (1, 10, None, "eu"),
        (3, 33, "c", None),
        (4, None, None, "us"),
        (5, None, "x", None),
        (6, 60, None, None),
    ]
    arctic.sql("CALL system.optimize(table => 'db.e', mode => 'full')")
    assert _rows(arctic)[1] == (3, 33, "c", None)
