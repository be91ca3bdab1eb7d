"""The fields of each arctic statement node, and the Spark statements arctic relies on."""

from __future__ import annotations

import pytest
from sqlglot import exp

from arctic_sql.errors import SqlParseError
from arctic_sql.parser import (
    Call,
    CompactTable,
    DescribeHistory,
    Explain,
    ShowDatabases,
    ShowTables,
    TagStatement,
    UnsetTableProperties,
    parse_one,
    to_spark_sql,
)


def _parse(sql: str, node: type[exp.Expression]) -> exp.Expression:
    tree = parse_one(sql)
    assert isinstance(tree, node), repr(tree)
    return tree


def _version_of(sql: str) -> exp.Version:
    table = parse_one(sql).find(exp.Table)
    assert table is not None
    version = table.args.get("version")
    assert isinstance(version, exp.Version), repr(table)
    return version


# SHOW ------------------------------------------------------------------------------------------


def test_show_tables_without_namespace_or_pattern() -> None:
    show = _parse("SHOW TABLES", ShowTables)
    assert show.args.get("this") is None
    assert show.args.get("catalog") is None
    assert show.args.get("like") is None


@pytest.mark.parametrize("sql", ["SHOW TABLES IN db LIKE 'a*'", "show tables from db 'a*'"])
def test_show_tables_in_database_with_pattern(sql: str) -> None:
    show = _parse(sql, ShowTables)
    assert show.this == exp.to_identifier("db")
    assert show.args["like"] == exp.Literal.string("a*")


def test_show_tables_in_catalog_and_database() -> None:
    show = _parse("SHOW TABLES IN cat.db", ShowTables)
    assert (show.args["catalog"].name, show.this.name) == ("cat", "db")


def test_show_tables_in_a_nested_namespace_is_left_to_spark() -> None:
    assert isinstance(parse_one("SHOW TABLES IN a.b.c"), exp.Command)


@pytest.mark.parametrize("word", ["DATABASES", "SCHEMAS", "NAMESPACES"])
def test_show_databases_in_all_three_spellings(word: str) -> None:
    show = _parse(f"SHOW {word} LIKE 'd*'", ShowDatabases)
    assert show.args["like"] == exp.Literal.string("d*")
    assert show.args.get("this") is None


def test_show_databases_in_catalog() -> None:
    assert _parse("SHOW NAMESPACES IN cat", ShowDatabases).this.name == "cat"


def test_show_like_without_pattern_is_an_error() -> None:
    with pytest.raises(SqlParseError, match="Expecting a quoted pattern after LIKE"):
        parse_one("SHOW TABLES LIKE")


# ALTER TABLE ... UNSET TBLPROPERTIES / COMPACT --------------------------------------------------


def test_unset_table_properties() -> None:
    unset = _parse("ALTER TABLE db.t UNSET TBLPROPERTIES ('k1', 'k2')", UnsetTableProperties)
    assert unset.this == exp.to_table("db.t")
    assert unset.expressions == [exp.Literal.string("k1"), exp.Literal.string("k2")]
    assert unset.args["exists"] is False


def test_unset_table_properties_if_exists_with_unquoted_dotted_key() -> None:
    unset = _parse(
        "ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS (write.delete.mode, 'a')", UnsetTableProperties
    )
    assert [key.name for key in unset.expressions] == ["write.delete.mode", "a"]
    assert all(key.is_string for key in unset.expressions)
    assert unset.args["exists"] is True


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("ALTER TABLE t UNSET ('a')", "Expecting TBLPROPERTIES after UNSET"),
        ("ALTER TABLE t UNSET TBLPROPERTIES ()", "Expecting at least one property key"),
    ],
)
def test_malformed_unset_is_an_error(sql: str, message: str) -> None:
    with pytest.raises(SqlParseError, match=message):
        parse_one(sql)


@pytest.mark.parametrize("kind", ["minor", "major", "full"])
def test_compact_table(kind: str) -> None:
    compact = _parse(f"ALTER TABLE db.t COMPACT {kind.upper()}", CompactTable)
    assert compact.this == exp.to_table("db.t")
    assert compact.args["kind"] == kind


def test_compact_without_a_known_kind_is_an_error() -> None:
    with pytest.raises(SqlParseError, match="Expecting MINOR, MAJOR or FULL after COMPACT"):
        parse_one("ALTER TABLE t COMPACT MEDIUM")


def test_other_alter_table_forms_stay_sqlglot_alter() -> None:
    alter = _parse("ALTER TABLE db.t SET TBLPROPERTIES ('a'='b')", exp.Alter)
    assert alter.this == exp.to_table("db.t")


# EXPLAIN -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("column", ["st.x", "COLUMN st.x", "COLUMN st.`in ner`.x"])
def test_alter_column_of_a_struct_field_is_an_alter_column_not_a_command(column: str) -> None:
    alter = _parse(f"ALTER TABLE db.t ALTER {column} TYPE BIGINT", exp.Alter)
    action = alter.args["actions"][0]
    assert isinstance(action, exp.AlterColumn)
    assert isinstance(action.this, exp.Dot)
    assert action.this.sql(dialect="spark") == column.removeprefix("COLUMN ")
    assert action.args["dtype"].sql() == "BIGINT"
    top = _parse("ALTER TABLE db.t ALTER COLUMN x TYPE BIGINT", exp.Alter).args["actions"][0]
    assert isinstance(top.this, exp.Identifier)


def test_explain_without_mode() -> None:
    explain = _parse("EXPLAIN SELECT * FROM db.t", Explain)
    assert isinstance(explain.this, exp.Select)
    assert explain.args.get("kind") is None


@pytest.mark.parametrize("mode", ["logical", "extended", "formatted", "codegen", "cost"])
def test_explain_modes(mode: str) -> None:
    explain = _parse(f"EXPLAIN {mode.upper()} DELETE FROM db.t WHERE id = 1", Explain)
    assert explain.args["kind"] == mode
    assert isinstance(explain.this, exp.Delete)


def test_explain_of_an_arctic_statement() -> None:
    explain = _parse("EXPLAIN CALL system.optimize(table => 'db.t')", Explain)
    assert isinstance(explain.this, Call)


def test_explain_without_statement_is_an_error() -> None:
    with pytest.raises(SqlParseError, match="Expecting a statement after EXPLAIN"):
        parse_one("EXPLAIN EXTENDED")


# CALL --------------------------------------------------------------------------------------------


def test_call_with_named_arguments() -> None:
    call = _parse("CALL system.optimize(table => 'db.t', max_tasks => 4)", Call)
    assert call.this == "system.optimize"
    first, second = call.expressions
    assert isinstance(first, exp.Kwarg) and isinstance(second, exp.Kwarg)
    assert (first.this, first.expression) == (exp.to_identifier("table"), exp.Literal.string("db.t"))
    assert (second.this.name, second.expression) == ("max_tasks", exp.Literal.number(4))


def test_call_with_catalog_and_positional_arguments() -> None:
    call = _parse("CALL arctic.system.rollback_to_version('db.t', 3)", Call)
    assert call.this == "arctic.system.rollback_to_version"
    assert call.expressions == [exp.Literal.string("db.t"), exp.Literal.number(3)]


def test_call_with_positional_then_named_arguments() -> None:
    call = _parse(
        "CALL system.expire_snapshots('db.t', older_than => current_timestamp() - INTERVAL 1 DAY)", Call
    )
    positional, named = call.expressions
    assert positional == exp.Literal.string("db.t")
    assert isinstance(named, exp.Kwarg) and isinstance(named.expression, exp.Sub)


def test_call_without_arguments() -> None:
    assert _parse("CALL system.list()", Call).expressions == []


def test_call_positional_after_named_is_an_error_at_the_argument() -> None:
    with pytest.raises(SqlParseError) as caught:
        parse_one("CALL system.optimize(table => 'db.t', 3)")
    assert "Positional argument after a named argument" in str(caught.value)
    assert (caught.value.line, caught.value.column) == (1, 39)


def test_call_and_explain_are_plain_names_inside_a_query() -> None:
    select = _parse("SELECT call, explain FROM t", exp.Select)
    assert [column.name for column in select.selects] == ["call", "explain"]


# DESCRIBE HISTORY --------------------------------------------------------------------------------


@pytest.mark.parametrize("sql", ["DESCRIBE HISTORY db.t", "desc history db.t"])
def test_describe_history(sql: str) -> None:
    assert _parse(sql, DescribeHistory).this == exp.to_table("db.t")


@pytest.mark.parametrize("sql", ["DESCRIBE history", "DESCRIBE history.events"])
def test_a_table_named_history_is_still_described(sql: str) -> None:
    describe = _parse(sql, exp.Describe)
    assert describe.this.name in {"history", "events"}


# Time travel and incremental reads ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("clause", "this"),
    [
        ("VERSION AS OF 3", "VERSION"),
        ("FOR SYSTEM_VERSION AS OF 3", "VERSION"),
        ("TIMESTAMP AS OF 3", "TIMESTAMP"),
        ("FOR SYSTEM_TIME AS OF 3", "TIMESTAMP"),
    ],
)
def test_as_of(clause: str, this: str) -> None:
    version = _version_of(f"SELECT * FROM db.t {clause}")
    assert (version.this, version.args["kind"]) == (this, "AS OF")
    assert version.expression == exp.Literal.number(3)


@pytest.mark.parametrize(
    ("clause", "this"),
    [
        ("VERSION BETWEEN 1 AND 5", "VERSION"),
        ("FOR SYSTEM_VERSION BETWEEN 1 AND 5", "VERSION"),
        ("TIMESTAMP BETWEEN 1 AND 5", "TIMESTAMP"),
        ("FOR SYSTEM_TIME BETWEEN 1 AND 5", "TIMESTAMP"),
    ],
)
def test_between(clause: str, this: str) -> None:
    version = _version_of(f"SELECT * FROM db.t {clause} WHERE id > 0")
    assert (version.this, version.args["kind"]) == (this, "BETWEEN")
    assert isinstance(version.expression, exp.Tuple)
    assert version.expression.expressions == [exp.Literal.number(1), exp.Literal.number(5)]


def test_time_travel_values_may_be_expressions() -> None:
    version = _version_of(
        "SELECT * FROM db.t TIMESTAMP BETWEEN get_latest_timestamp('db.t', 2) "
        "AND current_timestamp() - INTERVAL 1 HOUR"
    )
    start, end = version.expression.expressions
    assert isinstance(start, exp.Anonymous) and start.name == "get_latest_timestamp"
    assert isinstance(end, exp.Sub)


def test_time_travel_in_join_subquery_and_merge_source() -> None:
    sql = (
        "MERGE INTO db.t USING (SELECT * FROM db.s VERSION BETWEEN 1 AND 2 JOIN db.u VERSION AS OF 7 u "
        "ON s.id = u.id) s ON db.t.id = s.id WHEN MATCHED THEN DELETE"
    )
    versions = {table.name: table.args.get("version") for table in parse_one(sql).find_all(exp.Table)}
    assert versions["s"].args["kind"] == "BETWEEN"
    assert versions["u"].args["kind"] == "AS OF"
    assert versions["t"] is None


def test_time_travel_prints_in_spark_form() -> None:
    assert (
        to_spark_sql(parse_one("select * from t for system_version between 1 and 5 x"))
        == "SELECT * FROM t VERSION BETWEEN 1 AND 5 AS x"
    )
    assert to_spark_sql(parse_one("select * from t for system_time as of '2024-01-01'")) == (
        "SELECT * FROM t TIMESTAMP AS OF '2024-01-01'"
    )


def test_a_table_aliased_version_is_not_time_travel() -> None:
    table = parse_one("SELECT * FROM db.t version WHERE version.id = 1").find(exp.Table)
    assert table.alias == "version" and table.args.get("version") is None


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM t VERSION AS OF", "Expecting a version or timestamp after AS OF"),
        ("SELECT * FROM t VERSION BETWEEN 1", "Expecting AND in BETWEEN"),
        ("SELECT * FROM t VERSION BETWEEN 1 AND", "Expecting a version or timestamp after AND"),
    ],
)
def test_incomplete_time_travel_is_an_error(sql: str, message: str) -> None:
    with pytest.raises(SqlParseError, match=message):
        parse_one(sql)


# Spark statements arctic relies on ---------------------------------------------------------------


def test_create_table_keeps_primary_key_provider_partitioning_and_properties() -> None:
    create = _parse(
        "CREATE TABLE db.t (id BIGINT, name STRING, ts TIMESTAMP, PRIMARY KEY (id, name)) USING arctic "
        "PARTITIONED BY (name, days(ts), bucket(16, id), truncate(4, name)) TBLPROPERTIES ('k'='v')",
        exp.Create,
    )
    primary_key = create.this.find(exp.PrimaryKey)
    assert [column.name for column in primary_key.expressions] == ["id", "name"]
    properties = create.args["properties"]
    assert properties.find(exp.FileFormatProperty).name == "arctic"
    partitioned = properties.find(exp.PartitionedByProperty).this.expressions
    assert [type(e).__name__ for e in partitioned] == [
        "Identifier",
        "Anonymous",
        "PartitionedByBucket",
        "PartitionByTruncate",
    ]
    (property_,) = [p for p in properties.expressions if type(p) is exp.Property]
    assert (property_.name, property_.text("value")) == ("k", "v")


def test_metadata_table_is_a_three_part_name() -> None:
    table = parse_one("SELECT * FROM db.t.history").find(exp.Table)
    assert (table.catalog, table.db, table.name) == ("db", "t", "history")


def test_merge_keeps_every_when_form() -> None:
    merge = _parse(
        "MERGE INTO db.t t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * "
        "WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY SOURCE THEN DELETE",
        exp.Merge,
    )
    whens = merge.args["whens"].expressions
    assert [(w.args["matched"], bool(w.args.get("source"))) for w in whens] == [
        (True, False),
        (False, False),
        (False, True),
    ]


def test_insert_overwrite_keeps_partition_and_columns() -> None:
    insert = _parse(
        "INSERT OVERWRITE db.t PARTITION (dt='2024-01-01') (id, v) SELECT id, v FROM s", exp.Insert
    )
    assert insert.args["overwrite"] is True
    assert insert.find(exp.Partition) is not None
    assert [c.name for c in insert.this.expressions] == ["id", "v"]


@pytest.mark.parametrize(
    ("sql", "action", "exists", "version", "retain"),
    [
        ("ALTER TABLE db.t CREATE TAG q3", "create", False, None, None),
        (
            "ALTER TABLE db.t CREATE TAG IF NOT EXISTS q3 AS OF VERSION 7 RETAIN 30 DAYS",
            "create",
            True,
            "7",
            ("30", "days"),
        ),
        (
            "ALTER TABLE db.t CREATE OR REPLACE TAG q3 RETAIN 2 HOURS",
            "create_or_replace",
            False,
            None,
            ("2", "hours"),
        ),
        ("ALTER TABLE db.t REPLACE TAG q3 AS OF VERSION 2", "replace", False, "2", None),
        ("ALTER TABLE db.t DROP TAG IF EXISTS q3", "drop", True, None, None),
    ],
)
def test_tag_statements_round_trip(
    sql: str, action: str, exists: bool, version: str | None, retain: tuple[str, str] | None
) -> None:
    tag = _parse(sql, TagStatement)
    assert tag.this == exp.to_table("db.t")
    assert (tag.text("action"), tag.text("name"), bool(tag.args.get("exists"))) == (action, "q3", exists)
    assert (tag.args["version"].sql() if tag.args.get("version") else None) == version
    assert ((tag.args["retain"].sql(), tag.text("unit")) if tag.args.get("retain") else None) == retain
    assert to_spark_sql(tag) == sql


@pytest.mark.parametrize(
    ("sql", "action", "exists", "version"),
    [
        ("ALTER TABLE db.t CREATE BRANCH audit", "create", False, None),
        ("ALTER TABLE db.t CREATE BRANCH IF NOT EXISTS audit AS OF VERSION 7", "create", True, "7"),
        ("ALTER TABLE db.t DROP BRANCH IF EXISTS audit", "drop", True, None),
    ],
)
def test_branch_statements_round_trip(sql: str, action: str, exists: bool, version: str | None) -> None:
    branch = _parse(sql, TagStatement)
    assert branch.args.get("branch") is True
    assert (branch.text("action"), branch.text("name"), bool(branch.args.get("exists"))) == (
        action,
        "audit",
        exists,
    )
    assert (branch.args["version"].sql() if branch.args.get("version") else None) == version
    assert to_spark_sql(branch) == sql


def test_a_branch_takes_no_retention() -> None:
    with pytest.raises(SqlParseError):
        parse_one("ALTER TABLE db.t CREATE BRANCH audit RETAIN 3 DAYS")


def test_drop_column_stays_sqlglot_alter_and_a_tag_needs_its_unit() -> None:
    assert isinstance(parse_one("ALTER TABLE db.t DROP COLUMN c"), exp.Alter)
    with pytest.raises(SqlParseError, match="Expecting RETAIN <number> DAYS|HOURS|MINUTES"):
        parse_one("ALTER TABLE db.t CREATE TAG q3 RETAIN 3 WEEKS")
