"""Checking a script before it runs, with Spark's own parser on the suite's shared session
(arctic_sql.frontends.script_check; tests/unit/frontends/test_script_check.py has the cases that need no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlglot import exp

from arctic_sql.frontends.script_check import (
    STATEMENT_WORDS,
    ScriptError,
    check_script,
    spark_parse_error,
    split_script,
)
from arctic_sql.parser import parse

pytestmark = pytest.mark.spark

FIXTURES = Path(__file__).resolve().parents[1] / "parser" / "fixtures" / "statements.sql"


def _check(spark, text: str) -> None:
    check_script(text, split_script(text), lambda sql: spark_parse_error(spark, sql))


def test_every_statement_the_parser_must_take_passes_the_check_with_sparks_parser(spark):
    """Arctic's syntax that Spark's parser refuses (VERSION BETWEEN, COMPACT, PRIMARY KEY ... AS
    SELECT) is told apart from plain Spark SQL, which Spark's parser must accept as well."""
    statements = [s.sql for s in parse(FIXTURES.read_text()) if not isinstance(s.expression, exp.Command)]
    assert len(statements) > 80
    _check(spark, ";\n".join(statements))


@pytest.mark.parametrize(
    "lenient", ["SELECT * FROM db.t GROUP BY", "INSERT INTO db.t SELECT", "UPDATE db.t SET"]
)
def test_plain_spark_sql_that_only_sqlglot_accepts_fails_with_sparks_reason(spark, lenient):
    with pytest.raises(ScriptError) as raised:
        _check(spark, f"SELECT 1;\n\n{lenient};\nSELECT 3")
    headline = raised.value.headline()
    assert headline.startswith("Error in statement 2 (line 3): Invalid SQL: [PARSE_SYNTAX_ERROR] "), headline
    assert "\n" not in headline


def test_the_words_statements_start_with_are_every_one_sparks_grammar_allows(spark):
    """STATEMENT_WORDS lets through every first token of the running Spark's statement rule, so the
    check that needs no Spark never refuses what Spark would run."""
    from py4j.java_gateway import get_field

    jvm = spark.sparkContext._jvm
    antlr = jvm.org.antlr.v4.runtime
    lexer = jvm.org.apache.spark.sql.catalyst.parser.SqlBaseLexer(antlr.CharStreams.fromString(""))
    parser = jvm.org.apache.spark.sql.catalyst.parser.SqlBaseParser(antlr.CommonTokenStream(lexer))
    atn, vocabulary = parser.getATN(), parser.getVocabulary()
    rule = list(parser.getRuleNames()).index("compoundOrSingleStatement")
    first = atn.nextTokens(get_field(atn, "ruleToStartState")[rule])
    words = {str(vocabulary.getSymbolicName(token)) for token in first.toList()} - {"LEFT_PAREN"}
    assert "SELECT" in words
    assert words <= STATEMENT_WORDS, sorted(words - STATEMENT_WORDS)
