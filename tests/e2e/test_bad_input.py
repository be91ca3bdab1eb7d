"""Invariant 6: bad input gets a one-line error that names the problem, and changes nothing."""

from __future__ import annotations

import os
import re

import pytest

from arctic_sql.errors import (
    ArcticError,
    ExecutionError,
    InvalidArgumentError,
    NoSuchColumnError,
    NoSuchTableError,
    PrimaryKeyViolationError,
    SqlParseError,
    TableAlreadyExistsError,
    UnsupportedOperationError,
    VersionNotFoundError,
)

pytestmark = pytest.mark.spark


def _files(root: str) -> set[str]:
    found = set()
    for folder, _, names in os.walk(root):
        found |= {os.path.join(folder, n) for n in names if n.endswith(".parquet")}
    return found


@pytest.fixture
def table(arctic, warehouse):
    arctic.sql("CREATE TABLE db.t (id BIGINT, name STRING, PRIMARY KEY (id)) TBLPROPERTIES ('x.y' = '1')")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a'), (2, 'b')")
    return arctic


def _state(arctic, warehouse) -> tuple:
    rows = sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.t").collect())
    versions = [r[0] for r in arctic.sql("SELECT version FROM db.t.history").collect()]
    props = arctic.table("db.t").user_properties()
    schema = [f.name for f in arctic.table("db.t").schema.fields]
    return rows, versions, props, schema, _files(warehouse)


CASES = [
    ("SELEC * FROM db.t", SqlParseError, "SELEC"),
    ("SELECT * FROM db.t WHERE (id = 1", SqlParseError, "line 1"),
    ("SELECT * FROM db.nope", NoSuchTableError, "nope"),
    ("SELECT nope FROM db.t", InvalidArgumentError, "nope"),
    ("INSERT INTO db.t (id, nope) VALUES (3, 'c')", NoSuchColumnError, "nope"),
    ("UPDATE db.t SET nope = 'x' WHERE id = 1", NoSuchColumnError, "nope"),
    ("UPDATE db.t SET id = 5 WHERE id = 1", InvalidArgumentError, "primary key"),
    ("UPDATE db.t SET name = 'x', NAME = 'y'", InvalidArgumentError, "sets column 'name' twice"),
    (
        "MERGE INTO db.t t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = 'p', "
        "name = 'q'",
        InvalidArgumentError,
        "sets column 'name' twice",
    ),
    (
        "MERGE INTO db.t t USING (SELECT 9 AS id) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, name, name) "
        "VALUES (s.id, 'p', 'q')",
        InvalidArgumentError,
        "names column 'name' twice",
    ),
    ("INSERT INTO db.t VALUES (NULL, 'c')", PrimaryKeyViolationError, "null primary key"),
    ("INSERT INTO db.t VALUES (3, 'c'), (3, 'd')", PrimaryKeyViolationError, "id=3"),
    ("INSERT INTO db.t VALUES ('three', 'c')", ExecutionError, "three"),
    ("INSERT INTO db.t VALUES (3)", InvalidArgumentError, "1 values per row but 2 target columns"),
    ("SELECT * FROM db.t VERSION AS OF 99", VersionNotFoundError, "available: oldest version 1 at"),
    (
        "ALTER TABLE db.t SET TBLPROPERTIES ('self-optimizing.target-size' = '-5')",
        InvalidArgumentError,
        "self-optimizing.target-size",
    ),
    (
        "ALTER TABLE db.t SET TBLPROPERTIES ('change.file-index.hash-bucket' = '8')",
        InvalidArgumentError,
        "only be set at CREATE TABLE",
    ),
    ("ALTER TABLE db.t SET TBLPROPERTIES ('arctic.format' = 'x')", InvalidArgumentError, "reserved"),
    ("ALTER TABLE db.t DROP COLUMN id", InvalidArgumentError, "primary key column 'id'"),
    # A nested path is not the top-level column of its last name (`name` exists and must survive).
    ("ALTER TABLE db.t DROP COLUMN st.name", NoSuchColumnError, "Column 'st.name' does not exist"),
    ("ALTER TABLE db.t RENAME COLUMN st.name TO other", NoSuchColumnError, "Column 'st.name' does not exist"),
    ("ALTER TABLE db.t ADD COLUMNS (st.z DOUBLE)", NoSuchColumnError, "Column 'st' does not exist"),
    ("ALTER TABLE db.t ADD COLUMNS (name.z DOUBLE)", UnsupportedOperationError, "name is not a struct"),
    ("ALTER TABLE db.t RENAME COLUMN nope TO other", NoSuchColumnError, "nope"),
    ("ALTER TABLE db.t UNSET TBLPROPERTIES ('not.set')", InvalidArgumentError, "not.set"),
    ("CREATE TABLE db.t (id BIGINT, PRIMARY KEY (id))", TableAlreadyExistsError, "db.t"),
    (
        "MERGE INTO db.t t USING (SELECT 1 AS id, 'z' AS name UNION ALL SELECT 1, 'y') s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET name = s.name",
        PrimaryKeyViolationError,
        "id=1",
    ),
]


@pytest.mark.parametrize(("sql", "error", "needle"), CASES, ids=[c[0][:40] for c in CASES])
def test_bad_statement_names_the_problem_and_changes_nothing(table, warehouse, sql, error, needle):
    before = _state(table, warehouse)
    with pytest.raises(error) as raised:
        table.sql(sql)
    message = str(raised.value)
    assert "\n" not in message
    assert needle.lower() in message.lower(), message
    assert _state(table, warehouse) == before


@pytest.mark.parametrize(
    ("ddl", "needle"),
    [
        (
            "CREATE TABLE db.u (id BIGINT, PRIMARY KEY (id)) TBLPROPERTIES ('base.file-index.hash-bucket' = '3')",
            "power of two",
        ),
        ("CREATE TABLE db.u (id BIGINT, PRIMARY KEY (nope))", "nope"),
        (
            "CREATE TABLE db.u (id BIGINT, p STRING, PRIMARY KEY (id)) PARTITIONED BY (p)",
            "part of the primary key",
        ),
        ("CREATE TABLE db.u (id BIGINT, arctic_node INT)", "reserved"),
        ("CREATE TABLE db.u (id BIGINT, PRIMARY KEY (id)) PARTITIONED BY (days(id))", "days"),
        ("CREATE TABLE nodb.u (id BIGINT)", "nodb"),
    ],
)
def test_bad_create_table_creates_nothing(arctic, warehouse, ddl, needle):
    with pytest.raises(ArcticError) as raised:
        arctic.sql(ddl)
    assert needle.lower() in str(raised.value).lower()
    assert "\n" not in str(raised.value)
    tables = [r[1] for r in arctic.sql("SHOW TABLES IN db").collect()]
    assert "u" not in tables
    assert not _files(warehouse)


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        (
            "CREATE TABLE db.u (x DOUBLE, PRIMARY KEY (x))",
            "Primary key column 'x' has type DOUBLE; keys must be exact types (integers, DECIMAL, STRING, DATE, "
            "TIMESTAMP, ...), not FLOAT or DOUBLE",
        ),
        (
            "CREATE TABLE db.u (k DECIMAL(30,4), PRIMARY KEY (k))",
            "Primary key column 'k' has type DECIMAL(30,4); a DECIMAL key may have at most 18 digits",
        ),
        (
            "CREATE TABLE db.u (id BIGINT, PRIMARY KEY (id)) PARTITIONED BY (bucket(0, id))",
            "Partition transform bucket(0, id) needs a positive number of buckets, not 0",
        ),
        (
            "CREATE TABLE db.u (id BIGINT, PRIMARY KEY (id)) TBLPROPERTIES ('write.bucket.num' = '10')",
            "Invalid value '10' for table property 'write.bucket.num': must be a power of two between 1 and 1024",
        ),
        (
            "CREATE TABLE db.u (id BIGINT) TBLPROPERTIES ('transactional' = 'true')",
            "Table db.u sets 'transactional'='true' but has no PRIMARY KEY; transactional tables need one "
            "(add PRIMARY KEY (...) or leave the property out)",
        ),
    ],
)
def test_create_table_messages_use_the_users_words(arctic, warehouse, ddl, message):
    with pytest.raises(InvalidArgumentError) as raised:
        arctic.sql(ddl)
    assert str(raised.value) == message
    assert "u" not in [r[1] for r in arctic.sql("SHOW TABLES IN db").collect()]
    assert not _files(warehouse)


def test_a_null_key_is_shown_as_sql_null(table, warehouse):
    before = _state(table, warehouse)
    with pytest.raises(PrimaryKeyViolationError) as raised:
        table.sql("INSERT INTO db.t VALUES (NULL, 'c')")
    assert "(id=NULL)" in str(raised.value) and "None" not in str(raised.value)
    assert _state(table, warehouse) == before


def test_transactional_with_a_key_is_a_primary_key_table(arctic):
    arctic.sql("CREATE TABLE db.u (id BIGINT, PRIMARY KEY (id)) TBLPROPERTIES ('transactional' = 'true')")
    assert arctic.table("db.u").primary_key == ["id"]


def test_a_null_in_a_not_null_column_is_refused_on_every_write_path(arctic, warehouse):
    # A NULL that got in would make the keyed table unreadable (its merge casts to the table's types).
    arctic.sql("CREATE TABLE db.nn (id INT, must INT NOT NULL, v STRING, PRIMARY KEY (id))")
    arctic.sql("CREATE TABLE db.plain (id INT, must INT NOT NULL)")
    arctic.sql("INSERT INTO db.nn VALUES (1, 1, 'a'), (2, 2, 'b')")
    arctic.sql("INSERT INTO db.plain VALUES (1, 1)")
    before = _files(warehouse)
    cases = [
        (
            "INSERT INTO db.nn VALUES (3, NULL, 'c')",
            "INSERT into db.nn writes NULL into NOT NULL column 'must' (id=3)",
        ),
        ("UPDATE db.nn SET must = NULL WHERE id = 1", "(id=1)"),
        (
            "MERGE INTO db.nn t USING (SELECT 2 AS id) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.must = NULL",
            "(id=2)",
        ),
        ("INSERT OVERWRITE db.nn VALUES (5, NULL, 'z')", "(id=5)"),
        (
            "INSERT INTO db.plain VALUES (2, NULL)",
            "INSERT into db.plain writes NULL into NOT NULL column 'must'",
        ),
        ("UPDATE db.plain SET must = NULL", "NOT NULL column 'must'"),
    ]
    for sql, message in cases:
        with pytest.raises(InvalidArgumentError, match=re.escape(message)):
            arctic.sql(sql)
    spark = arctic.spark
    for name in ("db.nn", "db.plain"):
        with pytest.raises(Exception, match="NOT NULL column 'must'"):
            spark.createDataFrame([(9, None)], "id int, must int").write.format("arctic").mode("append").save(
                name
            )
    assert _files(warehouse) - before == set()  # nothing written survives
    # A delete needs only the key, even where other columns are NOT NULL.
    spark.createDataFrame([(2, "delete")], "id int, _change_type string").write.format("arctic").mode(
        "append"
    ).save("db.nn")
    assert sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.nn").collect()) == [(1, 1, "a")]
    assert sorted(tuple(r) for r in arctic.sql("SELECT * FROM db.plain").collect()) == [(1, 1)]


def test_a_date_past_year_9999_is_a_one_line_error(arctic):
    # Spark computes such dates; Iceberg's statistics (Python dates) cannot hold them.
    arctic.sql("CREATE TABLE db.dd (id INT, d DATE, PRIMARY KEY (id))")
    with pytest.raises(InvalidArgumentError, match="outside the years 1 to 9999"):
        arctic.sql("INSERT INTO db.dd SELECT 1, date_add(DATE'9999-12-31', 1)")
    assert arctic.sql("SELECT count(*) FROM db.dd").collect()[0][0] == 0
