"""The Thrift server's statement policy, without Spark: what a client may run, on the parsed form."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from arctic_sql.thrift.policy import PolicyViolation, StatementPolicy


@pytest.fixture
def warehouse(tmp_path) -> str:
    path = tmp_path / "warehouse"
    path.mkdir()
    return str(path)


@pytest.fixture
def policy(warehouse) -> StatementPolicy:
    return StatementPolicy(warehouse)


def _refusal(policy: StatementPolicy, sql: str) -> str:
    with pytest.raises(PolicyViolation) as refused:
        policy.check_sql(sql)
    assert refused.value.sqlstate == "42501" and "\n" not in refused.value.message
    return refused.value.message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT reflect('java.lang.Runtime', 'getRuntime')",
        "SELECT java_method('java.lang.System', 'getenv', 'HOME')",
        "select TRY_REFLECT('java.lang.System', 'exit', 0)",
        "SELECT system.builtin.reflect('java.lang.Runtime', 'getRuntime')",
        "WITH x AS (SELECT reflect('a', 'b') AS r) SELECT * FROM x",
        "SELECT 1; SELECT reflect('a', 'b')",
        "CREATE TEMPORARY FUNCTION f(x INT) RETURNS STRING RETURN reflect('a', 'b')",
        "SELECT * FROM IDENTIFIER('reflect')",
        "ADD JAR /tmp/evil.jar",
        "ADD FILE '/etc/passwd'",
        "add archive '/tmp/x.zip'",
        "CREATE FUNCTION f AS 'com.evil.F' USING JAR '/tmp/evil.jar'",
        "CREATE TEMPORARY FUNCTION f AS 'com.evil.F'",
        "SELECT TRANSFORM(id) USING 'id' AS (a STRING) FROM range(1)",  # runs a program on the server
        "SELECT TRANSFORM('x') USING 'cat /etc/hostname' AS (a STRING)",
    ],
)
def test_code_that_reaches_java_or_jars_is_refused(policy, sql):
    assert "--allow-unsafe-functions relaxes this" in _refusal(policy, sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM text.`/etc/passwd`",
        "SELECT * FROM `parquet`.`/tmp/data`",
        "select * from binaryFile.`/etc`",
        "SELECT count(*) FROM (SELECT * FROM csv.`file:///etc/hosts`) t",
        "SELECT * FROM IDENTIFIER('json.`/etc/x.json`')",
        "LOAD DATA LOCAL INPATH '/etc/passwd' INTO TABLE t",
        "INSERT OVERWRITE LOCAL DIRECTORY '/tmp/out' SELECT 1",
        "CREATE TABLE t (a INT) USING jdbc OPTIONS (url 'jdbc:h2:mem:x', dbtable 'y')",
        "CREATE TABLE t (a INT) USING org.apache.spark.sql.execution.datasources.jdbc",
    ],
)
def test_direct_file_access_and_foreign_sources_are_refused(policy, sql):
    assert "--allow-external-locations relaxes this" in _refusal(policy, sql)


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE t (a INT) USING parquet LOCATION '/etc'",
        "CREATE TABLE t (a INT, PRIMARY KEY (a)) LOCATION '/tmp/elsewhere'",
        "CREATE TABLE t USING parquet OPTIONS (path '/etc') AS SELECT 1",
        "CREATE TEMPORARY VIEW v USING text OPTIONS (path '/etc/passwd')",
        "CREATE TABLE t (a INT) LOCATION 's3a://bucket/x'",
        "CREATE TABLE t (a INT) LOCATION 'file://otherhost/{warehouse}/t'",
        "CREATE TABLE t (a INT) LOCATION '{warehouse}/../outside'",
        "CREATE TABLE t (a INT) LOCATION 'file://{warehouse}/%2E%2E/outside'",
        "CREATE TABLE t (a INT) LOCATION '{warehouse}-sibling/t'",
        "CREATE TABLE t (a INT) TBLPROPERTIES ('write.metadata.path' = '/tmp/m')",
        "ALTER TABLE t SET TBLPROPERTIES ('write.data.path' = '/tmp/d')",
        "CREATE DATABASE d LOCATION '/tmp/d'",
        "CREATE SCHEMA IF NOT EXISTS d LOCATION '/tmp/d'",
        "ALTER DATABASE d SET LOCATION '/etc'",
        "ALTER TABLE t SET LOCATION '/etc'",
        "ALTER TABLE t PARTITION (p = 1) SET LOCATION '/etc'",
        "ALTER TABLE t ADD PARTITION (p = 1) LOCATION '/etc'",
    ],
)
def test_locations_outside_the_warehouse_are_refused(policy, warehouse, sql):
    message = _refusal(policy, sql.format(warehouse=warehouse))
    assert f"is outside the warehouse {os.path.realpath(warehouse)}" in message
    assert message.endswith("(--allow-external-locations relaxes this)")


def test_a_symlink_in_the_warehouse_to_a_folder_outside_is_outside(policy, warehouse, tmp_path):
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", os.path.join(warehouse, "link"))
    _refusal(policy, f"CREATE TABLE t (a INT) LOCATION '{warehouse}/link/t'")


def test_a_table_cannot_take_over_files_already_in_the_warehouse(policy, warehouse):
    (Path(warehouse) / "catalog.db").write_bytes(b"SQLite format 3\0")
    spark_tables = Path(warehouse) / "spark-warehouse"
    (spark_tables / "db" / "t").mkdir(parents=True)
    (spark_tables / "db" / "t" / "part-0.parquet").write_bytes(b"PAR1")
    (spark_tables / "empty").mkdir()
    assert _refusal(policy, f"CREATE TABLE x (a INT) USING text LOCATION '{warehouse}'").startswith(
        f"LOCATION '{warehouse}' is the warehouse itself"
    )
    _refusal(policy, f"CREATE TABLE x (a INT) USING parquet LOCATION '{spark_tables}'")
    for location in (f"{spark_tables}/db", f"{spark_tables}/db/t"):
        message = _refusal(policy, f"CREATE TABLE x (a INT) USING parquet LOCATION '{location}'")
        assert f"LOCATION '{location}' already holds files" in message
    _refusal(policy, f"ALTER TABLE x SET LOCATION '{spark_tables}/db/t'")
    policy.check_sql(f"CREATE TABLE x (a INT) USING parquet LOCATION '{spark_tables}/empty'")
    # a view only reads: files already in the warehouse are fine, the warehouse itself is not
    policy.check_sql(f"CREATE TEMPORARY VIEW v USING parquet OPTIONS (path '{warehouse}/db/t')")
    _refusal(policy, f"CREATE TEMPORARY VIEW v USING text OPTIONS (path '{warehouse}')")


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE t (a INT) USING parquet LOCATION '{warehouse}/spark-warehouse/db/t'",
        "CREATE TABLE t (a INT) USING parquet LOCATION 'file://{warehouse}/spark-warehouse/db/t'",
        "CREATE TABLE t (a INT) LOCATION '{warehouse}/spark-warehouse/db/../db/t'",
        "CREATE DATABASE d LOCATION '{warehouse}/spark-warehouse/d.db'",
        "create table db.t primary key (id) as select 1 as id",
        "CREATE TABLE t (a INT) USING parquet",
        "ALTER TABLE t SET TBLPROPERTIES ('self-optimizing.enabled' = 'false')",
        "SELECT * FROM db.t VERSION AS OF 3",
        "SELECT * FROM IDENTIFIER('db.t')",
        "SELECT reflected FROM t WHERE name = 'reflect(x)'",
        "DESCRIBE FUNCTION reflect",
        "CREATE FUNCTION plus_one(x INT) RETURNS INT RETURN x + 1",
        "CALL system.optimize(table => 'db.t')",
        "SHOW TABLES",
        "LIST JAR",
        "MSCK REPAIR TABLE t",
    ],
)
def test_ordinary_statements_pass(policy, warehouse, sql):
    policy.check_sql(sql.format(warehouse=warehouse))


@pytest.mark.parametrize(
    "sql",
    [
        "SET spark.sql.shuffle.partitions=3",
        "set spark.sql.sources.partitionOverwriteMode = DYNAMIC",  # dbt-spark's insert_overwrite
        "SET spark.sql.session.timeZone = UTC",
        "SET TIME ZONE 'UTC'",
        "SET",
        "SET -v",
        "SET spark.sql.runSQLOnFiles",
        "RESET spark.sql.shuffle.partitions",
        "SET VAR x = 1",
    ],
)
def test_harmless_settings_and_reading_settings_pass(policy, sql):
    policy.check_sql(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SET spark.sql.runSQLOnFiles=true",
        "SET `spark.sql.variable.substitute`=true",
        "SET spark.sql.catalog.evil=com.evil.Catalog",
        "SET spark.hadoop.fs.defaultFS = file:///",
    ],
)
def test_settings_outside_the_allow_list_are_refused(policy, sql):
    message = _refusal(policy, sql)
    assert message.startswith("SET spark.") and message.endswith("(--allow-set-any relaxes this)")


@pytest.mark.parametrize(
    "sql", ["RESET", "reset", "RESET spark.sql.runSQLOnFiles", "RESET spark.sql.variable.substitute"]
)
def test_reset_may_not_turn_the_servers_settings_back_on(policy, warehouse, sql):
    # Spark's defaults would make files (text.`x`) and ${env:X} readable again.
    assert "(--allow-set-any relaxes this)" in _refusal(policy, sql)
    StatementPolicy(warehouse, allow_set_any=True).check_sql(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT IDENTIFIER('reflect')('java.lang.System', 'getProperty', 'user.home')",
        "INSERT OVERWRITE DIRECTORY '/tmp/out' USING csv SELECT 1 AS a",
        "SELECT * FROM s.t |> LIMIT 1",
    ],
)
def test_a_statement_the_parser_cannot_read_is_refused_unless_trusted(policy, warehouse, sql):
    # Spark's grammar is wider than arctic-sql's: such a statement would reach Spark unchecked.
    assert "(--trusted relaxes this)" in _refusal(policy, sql)


def test_a_location_inside_a_tables_folder_is_refused(policy, warehouse):
    # Another table's orphan removal would take the new table's files for its own.
    metadata = Path(warehouse) / "spark-warehouse" / "t" / "base" / "metadata"
    metadata.mkdir(parents=True)
    (metadata / "00000-a.metadata.json").write_text("{}")
    inside = f"{warehouse}/spark-warehouse/t/base/data/{'ab' * 16}/k=1"
    assert "inside another table's folder" in _refusal(
        policy, f"CREATE TABLE x (a INT) USING parquet LOCATION '{inside}'"
    )
    policy.check_sql(f"CREATE TABLE x (a INT) USING parquet LOCATION '{warehouse}/spark-warehouse/t2'")


@pytest.mark.parametrize("location", ["{warehouse}/sales", "{warehouse}/db/t", "{warehouse}/x/y/z"])
def test_a_location_where_the_arctic_catalog_may_put_a_database_or_table_is_refused(
    policy, warehouse, location
):
    """A Spark table at {warehouse}/sales, then CREATE DATABASE sales and an arctic table in it: the
    Spark table's INSERT OVERWRITE deleted the arctic table's files. Clients' folders are in
    {warehouse}/spark-warehouse, where Spark keeps its own tables."""
    location = location.format(warehouse=warehouse)
    message = _refusal(
        policy, f"CREATE TABLE x (a INT, p INT) USING parquet PARTITIONED BY (p) LOCATION '{location}'"
    )
    assert message.startswith(f"LOCATION '{location}' is outside the warehouse's folder for such tables")
    assert "spark-warehouse" in _refusal(policy, "CREATE DATABASE `spark-warehouse`")


def test_dynamic_sql_is_refused_unless_trusted(policy, warehouse):
    assert "(--trusted relaxes this)" in _refusal(policy, "EXECUTE IMMEDIATE 'SELECT reflect(''a'', ''b'')'")
    assert "(--trusted relaxes this)" in _refusal(policy, "SELECT * FROM IDENTIFIER(name_var)")
    StatementPolicy.trusted(warehouse).check_sql("EXECUTE IMMEDIATE 'SELECT 1'")


def test_each_option_relaxes_its_own_rule_only(warehouse):
    external = StatementPolicy(warehouse, allow_external_locations=True)
    external.check_sql("CREATE TABLE t (a INT) LOCATION '/etc'")
    external.check_sql("SELECT * FROM text.`/etc/passwd`")
    assert external.session_conf() == {"spark.sql.variable.substitute": "false"}
    with pytest.raises(PolicyViolation):
        external.check_sql("SELECT reflect('a', 'b')")
    unsafe = StatementPolicy(warehouse, allow_unsafe_functions=True)
    unsafe.check_sql("SELECT reflect('a', 'b'); ADD JAR /tmp/x.jar")
    assert unsafe.session_conf() == {"spark.sql.runSQLOnFiles": "false"}
    assert StatementPolicy.trusted(warehouse).session_conf() == {}
    with pytest.raises(PolicyViolation):
        unsafe.check_sql("SET spark.sql.runSQLOnFiles=true")
    StatementPolicy(warehouse, allow_set_any=True).check_sql("SET spark.sql.runSQLOnFiles=true")


def test_client_sessions_run_without_file_queries_and_variable_substitution(policy):
    assert policy.session_conf() == {
        "spark.sql.runSQLOnFiles": "false",
        "spark.sql.variable.substitute": "false",
    }
    policy.check_setting("spark.sql.shuffle.partitions")
    with pytest.raises(PolicyViolation):
        policy.check_setting("spark.sql.runSQLOnFiles")


def test_a_database_name_from_open_session_cannot_smuggle_a_statement():
    from arctic_sql.parser import parse
    from arctic_sql.thrift.service import use_statement

    statements = parse(use_statement("default`; SELECT java_method('java.lang.System', 'exit', 0) --"))
    assert len(statements) == 1
    assert (
        statements[0].expression.this.name == "default`; SELECT java_method('java.lang.System', 'exit', 0) --"
    )
