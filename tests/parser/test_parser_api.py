"""parse / parse_one / to_spark_sql: splitting, pass-through commands and error messages."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import sqlglot
from sqlglot import exp

from arctic_sql.errors import ArcticError, SqlParseError
from arctic_sql.parser import Arctic, ParsedStatement, parse, parse_one, to_spark_sql

# Splitting -------------------------------------------------------------------------------------


def test_split_ignores_semicolons_in_strings_identifiers_and_comments() -> None:
    text = (
        "SELECT 'a;b', \"c;d\" AS `e;f` FROM t; -- trailing; comment\n"
        "/* block ; comment */ INSERT INTO t VALUES (';');\n"
        "SHOW FUNCTIONS LIKE 'x;y'"
    )
    assert [statement.sql for statement in parse(text)] == [
        "SELECT 'a;b', \"c;d\" AS `e;f` FROM t",
        "INSERT INTO t VALUES (';')",
        "SHOW FUNCTIONS LIKE 'x;y'",
    ]


def test_split_skips_empty_statements_and_keeps_inner_comments() -> None:
    parsed = parse(";;\n  SELECT 1 -- one\n  + 2 ;;  ; USE db;\n-- the end\n")
    assert [statement.sql for statement in parsed] == ["SELECT 1 -- one\n  + 2", "USE db"]
    assert [type(statement.expression) for statement in parsed] == [exp.Select, exp.Use]


def test_nothing_to_parse_gives_no_statements() -> None:
    assert parse("") == []
    assert parse(" ; -- only a comment\n") == []


def test_command_text_is_kept_verbatim_for_spark() -> None:
    (statement,) = parse("  ADD JAR '/tmp/a b.jar'  ;")
    assert statement.sql == "ADD JAR '/tmp/a b.jar'"
    assert isinstance(statement.expression, exp.Command)


def test_parsed_statement_is_an_immutable_value() -> None:
    (statement,) = parse("USE db")
    assert statement == ParsedStatement(sql="USE db", expression=parse_one("USE db"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        statement.sql = "USE other"  # type: ignore[misc]


# Pass-through commands -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SET k=v",
        "SET -v",
        "CACHE TABLE x",
        "REFRESH TABLE x",
        "ANALYZE TABLE db.t COMPUTE STATISTICS FOR ALL COLUMNS",
        "SHOW FUNCTIONS",
        "SHOW CREATE TABLE db.t",
        "CLEAR CACHE",
        "RESET",
        "LIST JARS",
        "REPAIR TABLE db.t",
        "OPTIMIZE db.t ZORDER BY (id)",
        "VACUUM db.t",
    ],
)
def test_spark_statements_without_arctic_meaning_parse_silently(
    sql: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="sqlglot"):
        (statement,) = parse(sql)
    assert statement.sql == sql
    assert not isinstance(statement.expression, (exp.Alias, exp.Column))
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_statements_sqlglot_cannot_read_become_commands_not_nonsense() -> None:
    # Spark's dialect reads these as expressions such as `CLEAR AS CACHE`.
    for sql in ["CLEAR CACHE", "RESET spark.sql.x", "LIST JAR", "DESCRIBE db.t id"]:
        tree = parse_one(sql)
        assert isinstance(tree, exp.Command), sql
        assert to_spark_sql(tree) == sql


# parse_one and to_spark_sql ------------------------------------------------------------------------


def test_parse_one_accepts_a_trailing_semicolon() -> None:
    assert isinstance(parse_one("SELECT 1;"), exp.Select)


def test_parse_one_rejects_two_statements_pointing_at_the_second() -> None:
    with pytest.raises(SqlParseError) as caught:
        parse_one("SELECT 1;\n  SELECT 2")
    assert str(caught.value) == "Invalid SQL: expected one statement, found 2 (line 2, column 3)"


def test_parse_one_rejects_empty_text() -> None:
    with pytest.raises(SqlParseError, match="no statement found"):
        parse_one("-- nothing\n;")


def test_to_spark_sql_prints_spark_sql() -> None:
    tree = parse_one("select * from db.t for system_version as of 3 where ts > timestamp '2024-01-01'")
    assert to_spark_sql(tree) == (
        "SELECT * FROM db.t VERSION AS OF 3 WHERE ts > CAST('2024-01-01' AS TIMESTAMP)"
    )


@pytest.mark.parametrize(
    ("literal", "value"),
    [("'it''s'", "it's"), ('"q""q"', 'q"q'), ("''''", "'"), ("'a\"'", 'a"'), ("'x\\'y'", "x'y")],
)
def test_a_doubled_quote_in_a_string_is_the_quote_as_in_spark_4(literal: str, value: str) -> None:
    # Spark 4 reads 'it''s' as it's; reading it as two strings joined would store "its".
    (select,) = parse_one(f"SELECT {literal}").expressions
    assert select.this == value


def test_the_smallest_typed_literals_keep_their_minus_inside_the_type() -> None:
    # -128Y is a TINYINT; -(CAST(128 AS TINYINT)) overflows before the minus applies.
    assert to_spark_sql(parse_one("SELECT -128Y, -32768S, -9223372036854775808L, -x")) == (
        "SELECT CAST(-128 AS TINYINT), CAST(-32768 AS SMALLINT), CAST(-9223372036854775808 AS BIGINT), -x"
    )


def test_strings_apart_by_blanks_are_joined_as_in_spark() -> None:
    assert to_spark_sql(parse_one("SELECT 'a' 'b'")) == "SELECT CONCAT('a', 'b')"


def test_dialect_is_registered_with_sqlglot_by_name() -> None:
    tree = sqlglot.parse_one("CALL system.optimize(table => 'db.t')", read="arctic")
    assert tree.sql(dialect="arctic") == "CALL system.optimize(table => 'db.t')"
    assert sqlglot.Dialect.get_or_raise("arctic").__class__ is Arctic


# Errors ------------------------------------------------------------------------------------------


def test_syntax_error_names_the_problem_and_where_it_starts() -> None:
    with pytest.raises(SqlParseError) as caught:
        parse_one("SELECT * FROM t WHERE (a = 1")
    error = caught.value
    assert str(error) == "Invalid SQL: Expecting ) (line 1, column 28)"
    assert (error.line, error.column) == (1, 28)
    assert isinstance(error, ArcticError)
    assert isinstance(error.__cause__, sqlglot.errors.ParseError)


def test_error_position_counts_from_the_start_of_the_whole_text() -> None:
    with pytest.raises(SqlParseError) as caught:
        parse("SELECT 1;\nSELECT 2;\nSELECT * FROM t WHERE")
    assert (caught.value.line, caught.value.column) == (3, 17)
    assert "\n" not in str(caught.value)
    assert "<class" not in str(caught.value)


def test_an_error_in_a_later_statement_points_at_the_first_bad_token() -> None:
    with pytest.raises(SqlParseError) as caught:
        parse("USE db; SELECT * FROM t VERSION AS OF 1 2")
    assert "Unexpected token" in str(caught.value)
    assert (caught.value.line, caught.value.column) == (1, 41)


@pytest.mark.parametrize(
    ("sql", "message", "line", "column"),
    [
        ("SELECT 1;\nSELECT 'abc", "missing closing '", 2, 8),
        ("SELECT `abc", "missing closing `", 1, 8),
        ("SELECT 1 /* never closed", "unexpected end of text (unclosed comment?)", 1, 25),
    ],
)
def test_tokenizer_errors_name_the_problem(sql: str, message: str, line: int, column: int) -> None:
    with pytest.raises(SqlParseError) as caught:
        parse(sql)
    assert str(caught.value) == f"Invalid SQL: {message} (line {line}, column {column})"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT 1 FROM", "Invalid SQL: Expected table name but the statement ended (line 1, column 10)"),
        ("SELECT (", "Invalid SQL: incomplete paren expression (line 1, column 8)"),
    ],
)
def test_errors_name_the_problem_without_sqlglot_internals(sql, message):
    with pytest.raises(SqlParseError) as raised:
        parse(sql)
    assert str(raised.value) == message


def test_keep_unparsed_returns_failing_statements_with_their_error_and_table_names() -> None:
    text = "SELECT 1;\nSET spark.sql.x.dir=/p;\nSELECT * FROM t JOIN db.u ON (t.id = db.u.id"
    first, setting, broken = parse(text, keep_unparsed=True)
    assert first.error is None and isinstance(first.expression, exp.Select)
    assert setting.sql == "SET spark.sql.x.dir=/p" and isinstance(setting.expression, exp.Command)
    assert setting.table_names == ("spark.sql.x.dir",)
    assert broken.table_names == ("t", "db.u", "t.id", "db.u.id")
    assert broken.error is not None and (broken.error.line, broken.error.column) == (3, 43)
    with pytest.raises(SqlParseError, match="line 2"):
        parse(text)
    with pytest.raises(SqlParseError, match="missing closing"):
        parse("SELECT 'open", keep_unparsed=True)
