"""Tables without a primary key: one Iceberg table; appends, overwrites, copy-on-write DELETE/UPDATE."""

from __future__ import annotations

import pytest

from arctic_sql.errors import UnsupportedOperationError

pytestmark = pytest.mark.spark


def _rows(arctic, sql):
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


def test_append_only_table_lifecycle(arctic):
    arctic.sql("CREATE TABLE db.log (id BIGINT, msg STRING, day STRING) PARTITIONED BY (day)")
    assert arctic.table("db.log").change is None
    arctic.sql("INSERT INTO db.log VALUES (1, 'a', 'mon'), (1, 'a', 'mon'), (2, 'b', 'tue')")
    assert _rows(arctic, "SELECT * FROM db.log") == [(1, "a", "mon"), (1, "a", "mon"), (2, "b", "tue")]
    arctic.sql("INSERT OVERWRITE db.log VALUES (3, 'c', 'tue')")  # replaces only partition tue
    assert _rows(arctic, "SELECT * FROM db.log") == [(1, "a", "mon"), (1, "a", "mon"), (3, "c", "tue")]
    arctic.sql("UPDATE db.log SET msg = 'z' WHERE id = 1")
    arctic.sql("DELETE FROM db.log WHERE day = 'tue'")
    assert _rows(arctic, "SELECT * FROM db.log") == [(1, "z", "mon"), (1, "z", "mon")]
    assert _rows(arctic, "SELECT * FROM db.log VERSION AS OF 2") == [
        (1, "a", "mon"),
        (1, "a", "mon"),
        (3, "c", "tue"),
    ]
    operations = [r[0] for r in arctic.sql("SELECT operation FROM db.log.history").collect()]
    assert operations == ["insert", "overwrite", "update", "delete"]


def test_merge_needs_a_primary_key(arctic):
    arctic.sql("CREATE TABLE db.log (id BIGINT, msg STRING)")
    with pytest.raises(UnsupportedOperationError, match="primary key"):
        arctic.sql(
            "MERGE INTO db.log t USING (SELECT 1 AS id, 'x' AS msg) s ON t.id = s.id "
            "WHEN NOT MATCHED THEN INSERT *"
        )


def test_sources_may_be_other_arctic_tables_and_spark_tables(arctic):
    arctic.sql("CREATE TABLE db.a (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("CREATE TABLE db.b (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.spark.createDataFrame([(1, "s1"), (2, "s2")], "id long, v string").createOrReplaceTempView(
        "staging"
    )
    arctic.sql("INSERT INTO db.a SELECT * FROM staging")
    arctic.sql("INSERT INTO db.b SELECT id, concat(v, '!') FROM db.a WHERE id = 1")
    arctic.sql("MERGE INTO db.a t USING db.b s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *")
    arctic.sql("DELETE FROM db.a WHERE id IN (SELECT id FROM staging WHERE v = 's2')")
    assert _rows(arctic, "SELECT * FROM db.a") == [(1, "s1!")]


@pytest.mark.parametrize("key", ["", ", PRIMARY KEY (id, region)"])
def test_insert_overwrite_with_a_dynamic_partition_column_replaces_the_partitions_written(arctic, key):
    """What dbt-spark's insert_overwrite strategy sends: PARTITION (region), its values from the query."""
    arctic.spark.sql(
        "CREATE TABLE default.ref_parts (id INT, val STRING, region STRING) USING parquet "
        "PARTITIONED BY (region)"
    )
    arctic.sql(f"CREATE TABLE db.parts (id INT, val STRING, region STRING{key}) PARTITIONED BY (region)")
    try:
        for table, run in (("default.ref_parts", arctic.spark.sql), ("db.parts", arctic.sql)):
            run(f"INSERT INTO {table} VALUES (1, 'a', 'eu'), (2, 'b', 'us')")
            arctic.spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
            run(f"INSERT OVERWRITE TABLE {table} PARTITION (region) SELECT 3, 'c', 'eu'")
            arctic.spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
        expected = sorted(map(tuple, arctic.spark.sql("SELECT * FROM default.ref_parts").collect()))
        assert expected == [(2, "b", "us"), (3, "c", "eu")]
        assert sorted(map(tuple, arctic.sql("SELECT * FROM db.parts").collect())) == expected
        with pytest.raises(Exception, match="val is not a partition column of db.parts"):
            arctic.sql("INSERT OVERWRITE TABLE db.parts PARTITION (val) SELECT 4, 'd', 'eu'")
        with pytest.raises(Exception, match="id is not a partition column of db.parts"):
            arctic.sql("INSERT INTO db.parts PARTITION (region = 'eu', id = 9) SELECT 'd'")
    finally:
        arctic.spark.sql("DROP TABLE IF EXISTS default.ref_parts")
        arctic.sql("DROP TABLE IF EXISTS db.parts")


@pytest.mark.parametrize("key", ["", ", PRIMARY KEY (id, r)"])
def test_insert_forms_match_spark(arctic, key):
    """INSERT ... BY NAME matches columns by name (it went by position); INSERT OVERWRITE of a partition
    named in full empties it when the query has no rows (it kept the old rows); REPLACE WHERE is
    refused, as Spark refuses it for its own tables (it ran as a plain insert)."""
    arctic.spark.sql(
        "CREATE TABLE default.ref_forms (id BIGINT, a INT, r STRING) USING parquet PARTITIONED BY (r)"
    )
    arctic.sql(f"CREATE TABLE db.forms (id BIGINT, a INT, r STRING{key}) PARTITIONED BY (r)")
    try:
        for table, run in (("default.ref_forms", arctic.spark.sql), ("db.forms", arctic.sql)):
            run(f"INSERT INTO {table} VALUES (1, 1, 'eu'), (2, 2, 'us'), (3, 3, 'us')")
            run(f"INSERT INTO {table} BY NAME SELECT 'eu' AS r, 9 AS a, 4 AS id")
            run(
                f"INSERT OVERWRITE {table} PARTITION (r = 'us') SELECT id, a FROM VALUES (0L, 0) AS v(id, a) WHERE false"
            )
        expected = sorted(map(tuple, arctic.spark.sql("SELECT * FROM default.ref_forms").collect()))
        assert expected == [(1, 1, "eu"), (4, 9, "eu")]
        assert sorted(map(tuple, arctic.sql("SELECT * FROM db.forms").collect())) == expected
        with pytest.raises(UnsupportedOperationError, match="REPLACE WHERE is not supported"):
            arctic.sql("INSERT INTO db.forms REPLACE WHERE id >= 4 SELECT 5, 5, 'eu'")
        assert sorted(map(tuple, arctic.sql("SELECT * FROM db.forms").collect())) == expected
    finally:
        arctic.spark.sql("DROP TABLE IF EXISTS default.ref_forms")
        arctic.sql("DROP TABLE IF EXISTS db.forms")


@pytest.mark.parametrize("key", ["", ", PRIMARY KEY (id)"])
def test_statements_under_a_with_clause_read_its_ctes(arctic, key):
    """WITH c AS (...) INSERT / MERGE / UPDATE / DELETE: the statement's parts name the CTE (INSERT and
    MERGE failed with `c` not found)."""
    arctic.sql(f"CREATE TABLE db.ctes (id BIGINT, v STRING{key})")
    try:
        arctic.sql(
            "WITH c AS (SELECT 1 AS id, 'x' AS v UNION ALL SELECT 2, 'y') INSERT INTO db.ctes SELECT * FROM c"
        )
        arctic.sql("WITH c AS (SELECT 2 AS id) UPDATE db.ctes SET v = 'z' WHERE id IN (SELECT id FROM c)")
        arctic.sql("WITH c AS (SELECT 1 AS id) DELETE FROM db.ctes WHERE id IN (SELECT id FROM c)")
        if key:
            arctic.sql(
                "WITH c AS (SELECT 3 AS id, 'w' AS v) MERGE INTO db.ctes t USING c ON t.id = c.id "
                "WHEN NOT MATCHED THEN INSERT *"
            )
        expected = [(2, "z"), (3, "w")] if key else [(2, "z")]
        assert sorted(map(tuple, arctic.sql("SELECT * FROM db.ctes").collect())) == expected
    finally:
        arctic.sql("DROP TABLE IF EXISTS db.ctes")
