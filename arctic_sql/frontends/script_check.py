"""Check every statement of a script before any of them runs: arctic-sql's parser, then Spark's.

>>> [(s.number, s.line, s.sql) for s in split_script("SELECT 1;\\n\\n-- next\\nSELEC 2")]
[(1, 1, 'SELECT 1'), (2, 4, 'SELEC 2')]

First, without Spark, every statement must start with a word some statement of Spark SQL (or of
arctic-sql, whose statements start with the same words) starts with: a typo such as ``SELEC 1``
anywhere in the script is reported at once, and Spark is not started to say so. Then each statement
is judged by arctic-sql's parser, and by Spark's:

- A statement that uses arctic-sql's own syntax (its statements, time travel, a primary key) passes
  when arctic-sql's parser gives it a structure; Spark's parser would refuse ``VERSION BETWEEN``.
- Any other statement must also pass Spark's parser, because sqlglot is lenient (``SELECT * FROM t
  GROUP BY`` gets a structure) and Spark runs the statement in the end. Statements sqlglot has no
  grammar for parse as an opaque ``exp.Command``, which Spark alone judges.
- A statement arctic-sql's parser rejects passes if Spark's parser accepts it, unless it is arctic's
  (a CALL, or one naming an arctic table).

One statement failing is a :class:`ScriptError` naming its number and the line it starts on; nothing
of the script has run.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from arctic_sql.errors import SqlParseError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arctic_sql.parser import ParsedStatement

STATEMENT_WORDS: frozenset[str] = frozenset(
    {
        "ADD",
        "ALTER",
        "ANALYZE",
        "BEGIN",
        "CACHE",
        "CALL",
        "CLEAR",
        "CLOSE",
        "COMMENT",
        "COMMIT",
        "CREATE",
        "DECLARE",
        "DELETE",
        "DESC",
        "DESCRIBE",
        "DFS",
        "DROP",
        "EXECUTE",
        "EXPLAIN",
        "EXPORT",
        "FETCH",
        "FROM",
        "GRANT",
        "IMPORT",
        "INSERT",
        "LIST",
        "LOAD",
        "LOCK",
        "MAP",
        "MERGE",
        "MSCK",
        "OPEN",
        "REDUCE",
        "REFRESH",
        "REPAIR",
        "REPLACE",
        "RESET",
        "REVOKE",
        "ROLLBACK",
        "SELECT",
        "SET",
        "SHOW",
        "START",
        "TABLE",
        "TRUNCATE",
        "UNCACHE",
        "UNLOCK",
        "UPDATE",
        "USE",
        "VALUES",
        "WITH",
    }
)
"""The words a statement of Spark SQL can start with: the first tokens of its grammar's
``compoundOrSingleStatement`` rule (Spark 4.3; a ``(`` may start one too). arctic-sql's statements
start with these words as well. tests/e2e/test_script_check_spark.py compares them with the running Spark."""

_FIRST_WORD = re.compile(r"[^\W\d]\w*")


@dataclass(frozen=True)
class ScriptStatement:
    """One statement of a script, as :func:`arctic_sql.parser.parse` would cut it."""

    number: int
    """1-based position among the script's statements (empty ones do not count)."""
    line: int
    """The line of the script it starts on."""
    start: int
    """Its offset in the script."""
    sql: str
    """Its text without the ``;``."""


class ScriptError(SqlParseError):
    """A statement of a script that no parser accepts; nothing of the script has run."""

    def __init__(self, reason: str, number: int | None, line: int | None, source: str | None = None) -> None:
        super().__init__(reason)
        self.number = number
        self.statement_line = line
        self.source = source

    def headline(self) -> str:
        """``Error in statement 2 (line 3): <reason>``, the one line the shell prints."""
        where = f"statement {self.number} (line {self.statement_line})" if self.number is not None else ""
        if self.source is not None:
            where = f"{where} of {self.source}" if where else self.source
        return f"Error in {where}: {self}" if where else f"Error: {self}"


def split_script(text: str, source: str | None = None) -> list[ScriptStatement]:
    """The statements of ``text``, split on ``;`` outside strings and comments.

    An unclosed string, identifier or comment leaves no statements to check one by one: that is a
    :class:`ScriptError` at once, naming the statement it starts in where that can be told.
    """
    from arctic_sql.parser import Arctic

    try:
        tokens = Arctic().tokenize(text)
    except Exception:  # noqa: BLE001 - sqlglot's TokenError; parse() translates it
        raise _tokenizer_error(text, source) from None
    return [
        ScriptStatement(
            number,
            _line_of(text, chunk[0].start),
            chunk[0].start,
            text[chunk[0].start : chunk[-1].end + 1].strip(),
        )
        for number, chunk in enumerate(_chunks(tokens), start=1)
    ]


def check_statement_starts(
    statements: Sequence[ScriptStatement],
    source: str | None = None,
    words: Collection[str] = STATEMENT_WORDS,
) -> None:
    """Raise :class:`ScriptError` for the first statement that starts with a word no statement starts
    with (``SELEC 1``): neither parser could accept it, so no Spark is needed to say so.

    A statement starting with anything but a plain word (``(``, a quoted name) is left to the parsers.
    ``words`` are the known first words; a Spark session with parser extensions
    (``spark.sql.extensions``) may know more, and its caller skips this check.
    """
    for statement in statements:
        match = _FIRST_WORD.match(statement.sql)
        if match is None or match.group().upper() in words:
            continue
        word = match.group()
        close = difflib.get_close_matches(word.upper(), sorted(words), n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ScriptError(
            f"Invalid SQL: no statement starts with '{word}'{hint}", statement.number, statement.line, source
        )


def check_script(
    text: str,
    statements: Sequence[ScriptStatement],
    spark_error: Callable[[str], str | None],
    source: str | None = None,
    claimed: Callable[[ParsedStatement], bool] = lambda statement: False,
    words: Collection[str] | None = STATEMENT_WORDS,
) -> None:
    """Raise :class:`ScriptError` for the first statement the parsers do not accept (see above).

    First :func:`check_statement_starts` with ``words`` (``None`` skips it), for the whole script.
    ``spark_error(sql)`` is Spark's verdict (see :func:`spark_parse_error`); it is not asked about
    statements in arctic-sql's own syntax that arctic-sql's parser accepts. A statement arctic-sql's
    parser rejects that is arctic's (``claimed``: a CALL, or one naming an arctic table; see
    ``Session.claims_unparsed``) fails with arctic's error whatever Spark says: the session would
    not hand it to Spark either.
    """
    if words is not None:
        check_statement_starts(statements, source, words)
    verdicts = [(statement, _arctic_verdict(text, statement)) for statement in statements]
    for statement, parsed in verdicts:
        if parsed.error is None and uses_arctic_syntax(parsed.expression):
            continue
        if parsed.error is not None and claimed(parsed):
            raise ScriptError(str(parsed.error), statement.number, statement.line, source)
        spark_says = spark_error(statement.sql)
        if spark_says is None:
            continue
        reason = str(parsed.error) if parsed.error is not None else spark_says
        raise ScriptError(reason, statement.number, statement.line, source)


def uses_arctic_syntax(expression: exp.Expression) -> bool:
    """Whether a parsed statement is one of arctic-sql's statements or uses its clauses: time travel
    (``VERSION BETWEEN``, ``VERSION AS OF get_latest_version(...)``) or a primary key (also in
    ``CREATE TABLE ... PRIMARY KEY (id) AS SELECT``). Spark's parser may refuse such a statement,
    and the session runs it itself; anything else it hands to Spark in the end."""
    from arctic_sql.parser import ARCTIC_STATEMENTS

    if isinstance(expression, ARCTIC_STATEMENTS) or _materialized_view(expression):
        return True
    return expression.find(exp.Version, exp.PrimaryKey) is not None


def _materialized_view(expression: exp.Expression) -> bool:
    """``CREATE``, ``REFRESH`` or ``DROP MATERIALIZED VIEW``: sqlglot's own nodes, with a mark."""
    if isinstance(expression, exp.Refresh):
        return (expression.text("kind") or "").upper() == "MATERIALIZED VIEW"
    if isinstance(expression, exp.Drop):
        return bool(expression.args.get("materialized"))
    if isinstance(expression, exp.Create):
        return expression.find(exp.MaterializedProperty) is not None
    return False


def spark_parse_error(spark: SparkSession, sql: str) -> str | None:
    """What Spark's own SQL parser says of one statement: ``None`` if it parses, else one line.

    Only parses (no analysis: tables need not exist), through the session's parser, so its settings
    (ANSI mode, variable substitution) apply as they would in ``spark.sql``.
    """
    from pyspark.errors import ParseException

    from arctic_sql.spark import one_line

    try:
        spark._jsparkSession.sessionState().sqlParser().parsePlan(sql)  # noqa: SLF001 - no public parser API
    except ParseException as e:
        return f"Invalid SQL: {one_line(e)}"
    return None


def _chunks(tokens: list[Token]) -> list[list[Token]]:
    """The statements' tokens, cut exactly as :func:`arctic_sql.parser.parse` cuts them."""
    from arctic_sql.parser import split_statements

    return split_statements(tokens)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _arctic_verdict(text: str, statement: ScriptStatement) -> ParsedStatement:
    """The statement as arctic-sql's parser takes it: its tree, or (``error`` set) the parse error
    with its line and column in ``text`` and the names in it that may be tables."""
    from arctic_sql.parser import parse

    # Blank out what comes before (keeping line breaks), so positions count in the whole script.
    before = "".join(ch if ch == "\n" else " " for ch in text[: statement.start])
    return parse(before + statement.sql, keep_unparsed=True)[0]


def _tokenizer_error(text: str, source: str | None) -> ScriptError:
    from arctic_sql.parser import Arctic, parse

    try:
        parse(text)
    except SqlParseError as e:
        error = e
    else:  # the tokenizer failed where the parser did not: report the tokenizer's first line
        error = SqlParseError("Invalid SQL: could not split the text into statements")
    number = line = None
    if error.line is not None and error.column is not None:
        offset = _offset_of(text, error.line, error.column)
        try:
            tokens: list[Token] | None = Arctic().tokenize(text[:offset])
        except Exception:  # noqa: BLE001 - nothing better to say than the error itself
            tokens = None
        if tokens is not None:
            chunks = _chunks(tokens)
            # Does the bad text start a statement of its own, or continue the last one begun?
            starts_one = not tokens or tokens[-1].token_type == TokenType.SEMICOLON
            number = len(chunks) + 1 if starts_one else len(chunks)
            line = error.line if starts_one else _line_of(text, chunks[-1][0].start)
    return ScriptError(str(error), number, line, source)


def _offset_of(text: str, line: int, column: int) -> int:
    lines = text.split("\n")
    return sum(len(x) + 1 for x in lines[: line - 1]) + column - 1
