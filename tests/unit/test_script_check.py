"""Checking a script before it runs (arctic_sql.script_check), without Spark: Spark's verdict is a
function of the statement text here; tests/e2e/test_cli.py runs the real Spark parser."""

from __future__ import annotations

import pytest

from arctic_sql.script_check import ScriptError, check_script, split_script


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
        ("SELECT 1;\nSELECT 'open", "statement 2 (line 2) of f.sql: Invalid SQL: missing closing ' (line 2, column 8)"),
        ("SELECT 1;\n'open", "statement 2 (line 2) of f.sql: Invalid SQL: missing closing ' (line 2, column 1)"),
        ("SELECT 1 -- a;\n'open", "statement 1 (line 1) of f.sql: Invalid SQL: missing closing ' (line 2, column 1)"),
    ],
)
def test_an_unclosed_string_names_the_statement_it_starts_in(text, headline):
    with pytest.raises(ScriptError) as raised:
        split_script(text, "f.sql")
    assert raised.value.headline() == "Error in " + headline


def test_only_statements_arctic_leaves_opaque_or_rejects_are_left_to_spark():
    text = (
        "CALL system.optimize(table => 'db.t');\n"               # arctic's own: Spark would refuse it
        "SELECT * FROM db.t VERSION BETWEEN 1 AND 2;\n"          # likewise
        "SHOW FUNCTIONS;\n"                                      # no sqlglot grammar: Spark's to judge
        "SELECT 1 FROM;\n"                                       # arctic refuses, Spark accepts
    )
    verdict, asked = spark_refusing()
    check_script(text, split_script(text), verdict)
    assert asked == ["SHOW FUNCTIONS", "SELECT 1 FROM"]


def test_a_statement_spark_refuses_after_sqlglot_left_it_opaque_fails_with_sparks_reason():
    text = "SELECT 1;\nSELEC 1;\nSELECT 3"
    verdict, _ = spark_refusing("SELEC 1")
    with pytest.raises(ScriptError) as raised:
        check_script(text, split_script(text), verdict)
    assert raised.value.headline() == "Error in statement 2 (line 2): Spark refuses 'SELEC 1'"


def test_a_statement_both_parsers_refuse_fails_with_arctics_reason_placed_in_the_whole_script():
    text = "SELECT 1;\n\nSELECT a\nFROM t WHERE;"
    verdict, _ = spark_refusing("SELECT a\nFROM t WHERE")
    with pytest.raises(ScriptError) as raised:
        check_script(text, split_script(text), verdict, source="q.sql")
    headline = raised.value.headline()
    assert headline.startswith("Error in statement 2 (line 3) of q.sql: Invalid SQL: ")
    assert headline.endswith("Invalid SQL: incomplete where expression (line 4, column 8)")


def test_the_first_bad_statement_is_the_one_reported():
    text = "SELEC 1; SELECT 1 FROM; SELEC 2"
    verdict, _ = spark_refusing("SELEC 1", "SELECT 1 FROM", "SELEC 2")
    with pytest.raises(ScriptError) as raised:
        check_script(text, split_script(text), verdict)
    assert raised.value.number == 1


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
    assert asked == [] and claimed and "db.t" in claimed[0]
    check_script(text, split_script(text), verdict)  # not arctic's: Spark's parser is the judge
    assert asked == ["SELECT * FROM db.t WHERE (id = 1"]
