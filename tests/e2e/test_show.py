"""SHOW TBLPROPERTIES, SHOW COLUMNS, SHOW PARTITIONS and SHOW CREATE TABLE on arctic tables."""

from __future__ import annotations

import pytest

import arctic_sql
from arctic_sql.errors import InvalidArgumentError

pytestmark = pytest.mark.spark


@pytest.fixture
def events(arctic):
    arctic.sql(
        "CREATE TABLE db.events (id BIGINT, region STRING, ts TIMESTAMP, note STRING NOT NULL, "
        "amount DECIMAL(10, 2), `odd name` INT, PRIMARY KEY (id, region, ts)) "
        "PARTITIONED BY (region, days(ts), bucket(4, id)) "
        "TBLPROPERTIES ('write.bucket.num' = '8', 'team' = 'it\\'s ours', 'self-optimizing.enabled' = 'false')"
    )
    return arctic


def _rows(arctic, sql):
    return [tuple(r) for r in arctic.sql(sql).collect()]


def test_show_tblproperties_lists_the_users_properties_and_one_key(events):
    result = events.sql("SHOW TBLPROPERTIES db.events")
    assert result.columns == ["key", "value"]
    assert [tuple(r) for r in result.collect()] == [
        ("base.file-index.hash-bucket", "8"),
        ("self-optimizing.enabled", "false"),
        ("team", "it's ours"),
    ]
    assert _rows(events, "SHOW TBLPROPERTIES db.events ('team')") == [("team", "it's ours")]
    # The alias the user typed finds the key it is stored under.
    assert _rows(events, "SHOW TBLPROPERTIES db.events ('write.bucket.num')") == [("write.bucket.num", "8")]
    assert _rows(events, "SHOW TBLPROPERTIES db.events ('nope')") == [
        ("nope", "Table db.events does not have property: nope")
    ]


def test_show_columns_in_table_and_database(events):
    expected = [("id",), ("region",), ("ts",), ("note",), ("amount",), ("odd name",)]
    assert events.sql("SHOW COLUMNS IN db.events").columns == ["col_name"]
    assert _rows(events, "SHOW COLUMNS IN db.events") == expected
    assert _rows(events, "SHOW COLUMNS FROM events IN db") == expected
    with pytest.raises(InvalidArgumentError, match="two databases"):
        events.sql("SHOW COLUMNS IN other.events IN db")


def test_show_partitions_lists_partitions_holding_data(arctic):
    arctic.sql(
        "CREATE TABLE db.p (id BIGINT, region STRING, PRIMARY KEY (id, region)) PARTITIONED BY (region)"
    )
    assert _rows(arctic, "SHOW PARTITIONS db.p") == []
    arctic.sql("INSERT OVERWRITE db.p VALUES (1, 'eu'), (2, 'us')")
    arctic.sql("INSERT INTO db.p VALUES (3, 'ap')")  # change data only
    assert arctic.sql("SHOW PARTITIONS db.p").columns == ["partition"]
    assert _rows(arctic, "SHOW PARTITIONS db.p") == [("region=ap",), ("region=eu",), ("region=us",)]
    assert _rows(arctic, "SHOW PARTITIONS db.p PARTITION (region = 'eu')") == [("region=eu",)]
    with pytest.raises(InvalidArgumentError, match="'nope' is not a partition column"):
        arctic.sql("SHOW PARTITIONS db.p PARTITION (nope = 'eu')")
    arctic.sql("CREATE TABLE db.flat (id BIGINT)")
    with pytest.raises(InvalidArgumentError) as raised:
        arctic.sql("SHOW PARTITIONS db.flat")
    assert str(raised.value) == "SHOW PARTITIONS is not allowed on db.flat: it is not partitioned"


def _shape(arctic, name):
    table = arctic.table(name)
    described = [tuple(r) for r in arctic.sql(f"DESCRIBE {name}").collect()]
    required = [f.name for f in table.schema.fields if f.required]
    return described, table.user_properties(), table.primary_key, required, str(table.spec)


def test_show_create_table_recreates_the_same_table_on_a_fresh_warehouse(events, spark, tmp_path):
    result = events.sql("SHOW CREATE TABLE db.events")
    assert result.columns == ["createtab_stmt"]
    (statement,) = [r[0] for r in result.collect()]
    assert "PRIMARY KEY (id, region, ts)" in statement
    assert "PARTITIONED BY (region, days(ts), bucket(4, id))" in statement
    before = _shape(events, "db.events")

    fresh = arctic_sql.connect(warehouse=str(tmp_path / "fresh"), spark=spark)
    fresh.sql("CREATE DATABASE db")
    fresh.sql(statement)
    assert _shape(fresh, "db.events") == before

    events.sql("DROP TABLE db.events")
    events.sql(statement)
    assert _shape(events, "db.events") == before
    assert events.sql("SHOW CREATE TABLE db.events").collect()[0][0] == statement


def test_show_create_table_of_an_append_only_table(arctic):
    arctic.sql("CREATE TABLE db.log (msg STRING)")
    statement = arctic.sql("SHOW CREATE TABLE db.log").collect()[0][0]
    assert statement == "CREATE TABLE db.log (\n  msg STRING)\nUSING arctic"


def test_show_statements_on_spark_tables_pass_to_spark(arctic):
    arctic.sql(
        "CREATE TABLE db.plain (id INT, p STRING) USING parquet PARTITIONED BY (p) TBLPROPERTIES ('k' = 'v')"
    )
    assert ("k", "v") in _rows(arctic, "SHOW TBLPROPERTIES db.plain")
    assert _rows(arctic, "SHOW COLUMNS IN db.plain") == [("id",), ("p",)]
    assert "USING parquet" in arctic.sql("SHOW CREATE TABLE db.plain").collect()[0][0]
    arctic.spark.sql("DROP TABLE db.plain")
