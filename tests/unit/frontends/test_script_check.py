"""Checking a script before it runs (arctic_sql.frontends.script_check), without Spark: Spark's verdict is a
function of the statement text here; tests/e2e/test_cli.py runs the real Spark parser."""

from __future__ import annotations

import pytest

from arctic_sql.frontends.script_check import ScriptError, check_script, check_statement_starts, split_script


def spark_refusing(*refused: str):
    """Spark's verdict: refuses the given statements, and records every statement it was asked about."""
    asked: list[str] = []

    def verdict(sql: str) -> str | None:
        asked.append(sql)
        return f"Spark refuses {sql!r}" if sql in refused else None

    return verdict, asked


def test_split_numbers_statements_and_the_lines_they_start_on():
    text = "SELECT ';' AS s;;\n-- a comment; not a statement\n\nSELECT 2\n  FROM t;\nSELECT 3"
    assert [(s.number, s.line, s.sql) for s in split_script(text)] == [
        (1, 1, "SELECT ';' AS s"),
        (2, 4, "SELECT 2\n  FROM t"),
        (3, 6, "SELECT 3"),
    ]


@pytest.mark.parametrize(
    ("text", "headline"),
    [
        (
            "SELECT 1;\nSELECT 'open",
            "statement 2 (line 2) of f.sql: Invalid SQL: missing closing ' (line 2, column 8)",
        ),
        (
            "SELECT 1;\n'open",
            "statement 2 (line 2) of f.sql: Invalid SQL: missing closing ' (line 2, column 1)",
        ),
        (
            "SELECT 1 -- a;\n'open",
            "statement 1 (line 1) of f.sql: Invalid SQL: missing closing ' (line 2, column 1)",
        ),
    ],
)
def test_an_unclosed_string_names_the_statement_it_starts_in(text, headline):
    with pytest.raises(ScriptError) as raised:
        split_script(text, "f.sql")
    assert raised.value.headline() == "Error in " + headline


def test_statements_in_arctics_own_syntax_are_not_left_to_spark_and_every_other_one_is():
    text = (
        "CALL system.optimize(table => 'db.t');\n"  # arctic's own: Spark would refuse it
        "SELECT * FROM db.t VERSION BETWEEN 1 AND 2;\n"  # likewise
        "MERGE INTO db.t t USING (SELECT * FROM db.c VERSION AS OF get_latest_version('db.c')) s\n"
        "  ON t.id = s.id WHEN MATCHED THEN UPDATE SET *;\n"  # time travel inside
        "CREATE TABLE db.c PRIMARY KEY (id) AS SELECT 1 AS id;\n"  # a key on CREATE ... AS SELECT
        "ALTER TABLE db.t COMPACT MAJOR;\n"
        "SHOW FUNCTIONS;\n"  # no sqlglot grammar: Spark's to judge
        "SELECT 1 FROM;\n"  # arctic refuses, Spark accepts
        "SELECT id, count(*) FROM db.t GROUP BY id;\n"  # plain Spark SQL: Spark runs it
        "INSERT INTO db.t VALUES (1, 'a')"
    )
    verdict, asked = spark_refusing()
    check_script(text, split_script(text), verdict)
    assert asked == [
        "SHOW FUNCTIONS",
        "SELECT 1 FROM",
        "SELECT id, count(*) FROM db.t GROUP BY id",
        "INSERT INTO db.t VALUES (1, 'a')",
    ]


@pytest.mark.parametrize(
    "lenient", ["SELECT * FROM db.t GROUP BY", "INSERT INTO db.t SELECT", "UPDATE db.t SET"]
)
def test_plain_spark_sql_sqlglot_parses_leniently_fails_with_sparks_reason(lenient):
    """sqlglot gives these a structure; Spark's parser refuses them, and Spark would run them."""
    from arctic_sql.parser import parse

    assert parse(lenient)[0].error is None  # the gap: arctic-sql's parser alone lets it through
    text = f"CREATE DATABASE made;\n{lenient};\nSELECT 3"
    verdict, _ = spark_refusing(lenient)
    with pytest.raises(ScriptError) as raised:
        check_script(text, split_script(text), verdict)
    assert raised.value.headline() == f"Error in statement 2 (line 2): Spark refuses {lenient!r}"


def test_a_statement_spark_refuses_after_sqlglot_left_it_opaque_fails_with_sparks_reason():
    text = "SELECT 1;\nSHOW FUNKTIONS;\nSELECT 3"
    verdict, _ = spark_refusing("SHOW FUNKTIONS")
    with pytest.raises(ScriptError) as raised:
        check_script(text, split_script(text), verdict)
    assert raised.value.headline() == "Error in statement 2 (line 2): Spark refuses 'SHOW FUNKTIONS'"


def test_a_statement_both_parsers_refuse_fails_with_arctics_reason_placed_in_the_whole_script():
    text = "SELECT 1;\n\nSELECT a\nFROM t WHERE;"
    verdict, _ = spark_refusing("SELECT a\nFROM t WHERE")
    with pytest.raises(ScriptError) as raised:
        check_script(text, split_script(text), verdict, source="q.sql")
    headline = raised.value.headline()
    assert headline.startswith("Error in statement 2 (line 3) of q.sql: Invalid SQL: ")
    assert headline.endswith("Invalid SQL: incomplete where expression (line 4, column 8)")


def test_the_first_bad_statement_is_the_one_reported():
    text = "SELECT 1 FROM; SELECT 2 FROM t GROUP BY; SELECT 3 FROM"
    verdict, _ = spark_refusing("SELECT 1 FROM", "SELECT 2 FROM t GROUP BY", "SELECT 3 FROM")
    with pytest.raises(ScriptError) as raised:
        check_script(text, split_script(text), verdict)
    assert raised.value.number == 1


# a first word no statement starts with: found without Spark -----------------------------------------


@pytest.mark.parametrize(
    ("text", "headline"),
    [
        (
            "SELECT 1;\nSELEC 2",
            "statement 2 (line 2): Invalid SQL: no statement starts with 'SELEC' (did you mean SELECT?)",
        ),
        (
            "  selct 1",
            "statement 1 (line 1): Invalid SQL: no statement starts with 'selct' (did you mean SELECT?)",
        ),
        (
            "SELECT 1;\n\nINSRT INTO t VALUES (1)",
            "statement 2 (line 3): Invalid SQL: no statement starts with 'INSRT' (did you mean INSERT?)",
        ),
        (
            "SELECT 1; frobnicate db.t",
            "statement 2 (line 1): Invalid SQL: no statement starts with 'frobnicate'",
        ),
    ],
)
def test_an_unknown_first_word_is_reported_without_asking_spark(text, headline):
    verdict, asked = spark_refusing()
    with pytest.raises(ScriptError) as raised:
        check_script(text, split_script(text), verdict)
    assert raised.value.headline() == "Error in " + headline
    assert asked == []  # Spark's parser, which needs a running Spark, was never asked
    with pytest.raises(ScriptError) as alone:
        check_statement_starts(split_script(text))
    assert alone.value.headline() == "Error in " + headline


def test_an_unknown_first_word_anywhere_is_found_before_any_statement_is_parsed():
    """The check that needs no Spark runs over the whole script first, as the tokenizer's does."""
    text = "SELECT 1 FROM t GROUP BY;\nSELECT 2;\nSELEC 3"
    verdict, asked = spark_refusing("SELECT 1 FROM t GROUP BY")
    with pytest.raises(ScriptError) as raised:
        check_script(text, split_script(text), verdict)
    assert raised.value.number == 3 and asked == []


@pytest.mark.parametrize(
    "text",
    [
        "(SELECT 1) UNION (SELECT 2)",  # a parenthesis starts a query
        "`select` 1",  # a quoted name: the parsers judge it
        "with x AS (SELECT 1) SELECT * FROM x",
        "Call system.optimize(table => 'db.t')",
        "explain SELECT 1",
        "-- a comment first\nVALUES (1)",
        "/* hint */ FROM db.t SELECT *",
    ],
)
def test_statements_starting_with_a_known_word_or_no_word_pass_the_first_word_check(text):
    check_statement_starts(split_script(text))


def test_every_first_word_is_accepted_when_the_caller_passes_other_words():
    """A Spark session with parser extensions (Delta's VACUUM, ...) may know more statements."""
    check_statement_starts(split_script("VACUUM db.t"), words={"VACUUM"})
    check_script("VACUUM db.t", split_script("VACUUM db.t"), spark_refusing()[0], words=None)
    with pytest.raises(ScriptError):
        check_statement_starts(split_script("VACUUM db.t"))


def test_an_unparsable_statement_that_is_arctics_fails_with_arctics_error_whatever_spark_says():
    text = "SELECT 1;\nSELECT * FROM db.t WHERE (id = 1"
    verdict, asked = spark_refusing()  # Spark would take it
    claimed = []

    def arctics(statement) -> bool:  # the session's claim: it names an arctic table
        claimed.append(statement.table_names)
        return True

    with pytest.raises(ScriptError) as raised:
        check_script(text, split_script(text), verdict, claimed=arctics)
    assert raised.value.headline().startswith("Error in statement 2 (line 2): Invalid SQL:")
    assert asked == ["SELECT 1"] and claimed and "db.t" in claimed[0]
    check_script(text, split_script(text), verdict)  # not arctic's: Spark's parser is the judge
    assert asked[1:] == ["SELECT 1", "SELECT * FROM db.t WHERE (id = 1"]
