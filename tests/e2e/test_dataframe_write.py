"""``df.write.format("arctic")``: upserts, deletes by ``_change_type``, appends, overwrites, one version
per write, and bad input refused before anything is written."""

from __future__ import annotations

import datetime
import os

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.spark

SCHEMA = "id long, v string, day string"


def _rows(arctic, table="db.t"):
    return {r[0]: tuple(r[1:]) for r in arctic.sql(f"SELECT * FROM {table}").collect()}


def _versions(arctic, table="db.t"):
    return [r[0] for r in arctic.sql(f"SELECT operation FROM {table}.history").collect()]


def _write(arctic, rows, schema=SCHEMA, mode="append", table="db.t", **options):
    writer = arctic.spark.createDataFrame(rows, schema).write.format("arctic").mode(mode)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(table)


def test_upserts_deletes_and_overwrite_follow_the_model(arctic):
    arctic.sql(
        "CREATE TABLE db.t (id BIGINT, v STRING, day STRING, PRIMARY KEY (id, day)) PARTITIONED BY (day)"
    )
    model: dict[int, tuple] = {}
    first = [(i, f"a{i}", "mon" if i % 2 else "tue") for i in range(20)]
    _write(arctic, first)
    model.update({i: (v, d) for i, v, d in first})
    assert _rows(arctic) == model
    changes = [
        (3, "b3", "mon", "update_postimage"),
        (3, "old", "mon", "update_preimage"),
        (4, None, "tue", "delete"),
        (30, "new", "mon", "insert"),
        (5, "u5", "mon", "upsert"),
        (6, None, "tue", "DELETE"),
    ]
    _write(arctic, changes, schema=SCHEMA + ", _change_type string")
    model.update({3: ("b3", "mon"), 30: ("new", "mon"), 5: ("u5", "mon")})
    del model[4], model[6]
    assert _rows(arctic) == model
    _write(arctic, [(100, "x", "tue")], mode="overwrite")  # replaces partition tue only
    model = {k: v for k, v in model.items() if v[1] != "tue"}
    model[100] = ("x", "tue")
    assert _rows(arctic) == model
    assert _versions(arctic) == ["write", "write", "overwrite"]


def test_an_empty_overwrite_empties_an_unpartitioned_table_as_insert_overwrite_does(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, day STRING, PRIMARY KEY (id))")
    arctic.sql("CREATE TABLE db.log (id BIGINT, v STRING)")
    arctic.sql(
        "CREATE TABLE db.parts (id BIGINT, v STRING, day STRING, PRIMARY KEY (id, day)) PARTITIONED BY (day)"
    )
    for table in ("db.t", "db.log", "db.parts"):
        arctic.sql(f"INSERT INTO {table} SELECT 1, 'a'" + (", 'mon'" if table != "db.log" else ""))
    _write(arctic, [], mode="overwrite")
    _write(arctic, [], schema="id long, v string", mode="overwrite", table="db.log")
    _write(arctic, [], mode="overwrite", table="db.parts")  # no rows: no partition is replaced
    assert _rows(arctic) == {} and _rows(arctic, "db.log") == {}
    assert _versions(arctic) == ["insert", "overwrite"]
    assert _rows(arctic, "db.parts") == {1: ("a", "mon")} and _versions(arctic, "db.parts") == ["insert"]


def test_missing_nullable_columns_are_null_and_names_match_in_any_case(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, day STRING, PRIMARY KEY (id))")
    _write(arctic, [(1, "a")], schema="ID long, V string")
    assert _rows(arctic) == {1: ("a", None)}


def test_tables_without_a_key_get_appends(arctic):
    arctic.sql("CREATE TABLE db.log (id BIGINT, v STRING)")
    _write(arctic, [(1, "a"), (1, "a")], schema="id long, v string", table="db.log")
    _write(arctic, [(2, "b")], schema="id long, v string", table="db.log")
    rows = sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.log").collect())
    assert rows == [(1, "a"), (1, "a"), (2, "b")]
    assert _versions(arctic, "db.log") == ["append", "append"]


def test_a_write_of_many_tasks_is_one_version_with_unique_keys(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    df = arctic.spark.range(0, 5000, numPartitions=4).selectExpr("id", "cast(id * 2 as string) as v")
    df.write.format("arctic").mode("append").save("db.t")
    assert arctic.sql("SELECT count(*), sum(id), count(distinct id) FROM db.t").collect()[0] == (
        5000,
        12497500,
        5000,
    )
    assert len(_versions(arctic)) == 1


def test_duplicate_keys_across_tasks_are_refused_and_nothing_is_written(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    df = arctic.spark.createDataFrame([(1, "a"), (2, "b"), (1, "c")], "id long, v string").repartition(3)
    with pytest.raises(
        Exception, match=r"PrimaryKeyViolationError: WRITE into db.t writes primary key \(id=1\) 2 times"
    ):
        df.write.format("arctic").mode("append").save("db.t")
    assert _rows(arctic) == {}
    assert _versions(arctic) == []
    table = arctic.table("db.t")
    data = os.path.join(table.change.location().removeprefix("file://"), "data")
    leftovers = (
        [f for _, _, fs in os.walk(data) for f in fs if f.endswith(".parquet")] if os.path.isdir(data) else []
    )
    assert leftovers == []


@pytest.mark.parametrize(
    ("schema", "options", "mode", "message"),
    [
        (
            "id long, v string, zzz string",
            {},
            "append",
            "InvalidArgumentError: Column 'zzz' is not a column of db.t",
        ),
        ("v string", {}, "append", "lack its primary key column 'id'"),
        ("id long, v string", {"colour": "red"}, "append", "Unknown option 'colour'"),
        ("id long, v string, _change_type string", {}, "overwrite", "_change_type is for appends"),
    ],
)
def test_bad_writes_are_refused_in_one_line_before_anything_is_written(
    arctic, schema, options, mode, message
):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, day STRING, PRIMARY KEY (id))")
    rows = [tuple([1, "a", "upsert"][: len(schema.split(","))])] if schema.startswith("id") else [("a",)]
    with pytest.raises(Exception, match=message):
        _write(arctic, rows, schema=schema, mode=mode, **options)
    assert _versions(arctic) == []


def test_a_column_spark_would_not_write_into_the_table_is_refused_before_anything_is_written(arctic):
    """Spark's store assignment: a string into a number or a date, a boolean into a number, and the
    same column twice (names are case-insensitive) are refused; numbers into wider or narrower
    numbers, and anything into a string, are written."""
    arctic.sql("CREATE TABLE db.t (id BIGINT, n INT, d DATE, s STRING, PRIMARY KEY (id))")
    refused = [
        (
            [("1", 2, None, "x")],
            "id string, n int, d date, s string",
            "Column 'id' is string, which cannot be written into db.t's bigint column 'id'",
        ),
        ([(1, True, None, "x")], "id long, n boolean, d date, s string", "Column 'n' is boolean"),
        ([(1, 2, "2024-01-01", "x")], "id long, n int, d string, s string", "Column 'd' is string"),
        ([(1, 2, 3)], "id long, n int, N int", "Column 'N' appears twice"),
    ]
    for rows, schema, message in refused:
        with pytest.raises(Exception, match=message):
            _write(arctic, rows, schema=schema)
    assert _versions(arctic) == []
    _write(
        arctic,
        [(1, 2.0, datetime.datetime(2024, 1, 1, 10), 7)],
        schema="id int, n double, d timestamp, s long",
    )
    assert arctic.sql("SELECT * FROM db.t").collect() == [(1, 2, datetime.date(2024, 1, 1), "7")]


def test_a_bad_change_type_names_the_value(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    _write(arctic, [(1, "a")], schema="id long, v string")
    with pytest.raises(Exception, match="InvalidArgumentError: _change_type 'upsertt' is not one of"):
        _write(arctic, [(2, "b", "upsertt")], schema="id long, v string, _change_type string")
    assert _rows(arctic) == {1: ("a",)}
    assert len(_versions(arctic)) == 1


def test_a_missing_table_is_one_line(arctic):
    with pytest.raises(Exception, match="Table or view not found: db.nope"):
        _write(arctic, [(1, "a", "x")], table="db.nope")


def test_arrow_written_change_file_matches_sparks_layout(arctic):
    """The same rows through SQL INSERT (Spark's writer) and df.write (the Arrow writer): same folders,
    names, field ids and Parquet types."""
    arctic.sql(
        "CREATE TABLE db.a (id BIGINT, v STRING, ts TIMESTAMP, d DATE, PRIMARY KEY (id, ts)) PARTITIONED BY (days(ts))"
    )
    arctic.sql(
        "CREATE TABLE db.b (id BIGINT, v STRING, ts TIMESTAMP, d DATE, PRIMARY KEY (id, ts)) PARTITIONED BY (days(ts))"
    )
    arctic.sql("INSERT INTO db.a VALUES (7, 'x', TIMESTAMP '2024-05-01 10:00:00', DATE '2024-05-01')")
    arctic.sql("SELECT * FROM db.a").write.format("arctic").mode("append").save("db.b")
    a, b = (_one_file(arctic.table(t)) for t in ("db.a", "db.b"))
    assert a[0] == b[0]  # folders below the write's own
    assert a[1].startswith("part-00000-") and a[1].endswith(".c000.snappy.parquet")
    assert b[1].startswith("part-") and b[1].endswith(".c000.snappy.parquet") and len(a[1]) == len(b[1])
    assert a[2] == b[2]  # columns with field ids and types
    assert _rows(arctic, "db.a") == _rows(arctic, "db.b")


def _one_file(table):
    files = _change_paths(table)
    assert len(files) == 1
    path = files[0].removeprefix("file://").removeprefix("file:")
    relative = path.split("/data/", 1)[1].split("/", 1)[1]
    folders, name = relative.rsplit("/", 1)
    schema = pq.read_schema(path)
    shape = [
        (f.name, str(f.type), f.metadata.get(b"PARQUET:field_id") if f.metadata else None) for f in schema
    ]
    physical = [(c.name, c.physical_type, str(c.logical_type)) for c in pq.ParquetFile(path).schema]
    return folders, name, (shape, physical)


def _change_paths(table):
    from arctic_sql.table.reading.scan import live_files

    return [f.path for f in live_files(table.change, table.change.current_snapshot(), "change")]
