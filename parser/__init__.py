"""Parse arctic SQL: Spark SQL plus arctic-sql's statements and clauses.

>>> from arctic_sql.parser import parse, parse_one, to_spark_sql
>>> [s.sql for s in parse("USE db; SELECT ';' AS x")]
['USE db', "SELECT ';' AS x"]
>>> call = parse_one("CALL system.optimize(table => 'db.t')")
>>> type(call).__name__, call.name
('Call', 'system.optimize')
>>> to_spark_sql(parse_one("select * from db.t for system_version as of 3"))
'SELECT * FROM db.t VERSION AS OF 3'

Statements sqlglot has no grammar for (``SET k=v``, ``SHOW FUNCTIONS``, ``CLEAR CACHE``, ...) parse as
an opaque ``exp.Command``; their ``ParsedStatement.sql`` is what the session hands to Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from arctic_sql.errors import SqlParseError

from .dialect import Arctic
from .sqlglot_errors import line_and_column, parse_error_to_arctic, token_error_to_arctic
from .statements import (
    ARCTIC_STATEMENTS,
    Call,
    CompactTable,
    DescribeHistory,
    Explain,
    ShowColumns,
    ShowCreateTable,
    ShowDatabases,
    ShowPartitions,
    ShowTableProperties,
    ShowTables,
    TableOrder,
    TagStatement,
    UnsetTableProperties,
)

__all__ = [
    "ARCTIC_STATEMENTS",
    "Arctic",
    "Call",
    "CompactTable",
    "DescribeHistory",
    "Explain",
    "ParsedStatement",
    "ShowColumns",
    "ShowCreateTable",
    "ShowDatabases",
    "ShowPartitions",
    "ShowTableProperties",
    "ShowTables",
    "TableOrder",
    "TagStatement",
    "UnsetTableProperties",
    "parse",
    "parse_one",
    "to_spark_sql",
]

_DIALECT = Arctic()


@dataclass(frozen=True)
class ParsedStatement:
    """One statement of a SQL text: its original text and its syntax tree."""

    sql: str
    """The statement as written (without its ``;``), to hand to Spark unchanged."""
    expression: exp.Expression
    """The sqlglot tree; arctic statements use the nodes of :mod:`arctic_sql.parser.statements`.
    For a statement the dialect could not parse (see ``keep_unparsed``), an ``exp.Command``."""
    error: SqlParseError | None = None
    """Why the dialect could not parse the statement, or None when it could."""
    table_names: tuple[str, ...] = ()
    """For a statement that did not parse: the names in it that may be tables (``db.t``, and single
    words after FROM, JOIN, TABLE, INTO or UPDATE), so a caller can tell whether it is arctic's."""


def parse(text: str, *, keep_unparsed: bool = False) -> list[ParsedStatement]:
    """Split ``text`` on ``;`` outside strings and comments and parse each statement.

    Empty statements are skipped. Raises :class:`~arctic_sql.errors.SqlParseError` naming the
    problem and its line and column (counted in ``text``) at the first statement that fails; with
    ``keep_unparsed`` such a statement is returned instead, with its ``error`` and ``table_names``
    set, for a caller that hands statements it does not claim to Spark (whose grammar is wider).
    An unterminated string or comment is an error either way.
    """
    tokens = _tokenize(text)
    statements = []
    for chunk in split_statements(tokens):
        sql = text[chunk[0].start : chunk[-1].end + 1].strip()
        try:
            expression = _parse_chunk(text, chunk, tokens)
        except SqlParseError as e:
            if not keep_unparsed:
                raise
            command = exp.Command(this=chunk[0].text.upper(), expression=exp.Literal.string(sql))
            statements.append(
                ParsedStatement(sql=sql, expression=command, error=e, table_names=_table_names(chunk))
            )
            continue
        statements.append(ParsedStatement(sql=sql, expression=expression))
    return statements


# Words after which a single name is a table; longer dotted names are candidates anywhere.
_TABLE_WORDS = frozenset({TokenType.FROM, TokenType.JOIN, TokenType.TABLE, TokenType.INTO, TokenType.UPDATE})
_NAME_TOKENS = frozenset({TokenType.VAR, TokenType.IDENTIFIER})


def _table_names(chunk: list[Token]) -> tuple[str, ...]:
    names: list[str] = []
    index = 0
    while index < len(chunk):
        token = chunk[index]
        if token.token_type not in _NAME_TOKENS and not token.text.isidentifier():
            index += 1
            continue
        parts = [token.text]
        end = index + 1
        while (
            end + 1 < len(chunk)
            and chunk[end].token_type == TokenType.DOT
            and (chunk[end + 1].token_type in _NAME_TOKENS or chunk[end + 1].text.isidentifier())
        ):
            parts.append(chunk[end + 1].text)
            end += 2
        after_table_word = index > 0 and chunk[index - 1].token_type in _TABLE_WORDS
        if len(parts) > 1 or after_table_word:
            names.append(".".join(parts))
        index = end
    return tuple(names)


def parse_one(text: str) -> exp.Expression:
    """Parse ``text`` that holds exactly one statement (a trailing ``;`` is fine).

    >>> parse_one("DESC HISTORY db.t").this.sql()
    'db.t'
    """
    tokens = _tokenize(text)
    chunks = split_statements(tokens)
    if not chunks:
        raise SqlParseError("Invalid SQL: no statement found")
    if len(chunks) > 1:
        line, column = line_and_column(text, chunks[1][0].start)
        raise SqlParseError(f"Invalid SQL: expected one statement, found {len(chunks)}", line, column)
    return _parse_chunk(text, chunks[0], tokens)


def to_spark_sql(expression: exp.Expression) -> str:
    """Print a tree as Spark SQL; arctic statements and time-travel clauses in arctic's syntax.

    ``parse_one(to_spark_sql(tree)) == tree`` for every tree :func:`parse` builds.
    """
    return _DIALECT.generate(expression)


def _tokenize(text: str) -> list[Token]:
    try:
        return _DIALECT.tokenize(text)
    except TokenError as e:
        raise token_error_to_arctic(e, text) from e


def split_statements(tokens: list[Token]) -> list[list[Token]]:
    """Group tokens into statements at ``;`` tokens; strings and comments are single tokens
    already, so a ``;`` inside them never splits. Empty statements are dropped."""
    chunks: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            chunks.append([])
        else:
            chunks[-1].append(token)
    return [chunk for chunk in chunks if chunk]


def _parse_chunk(text: str, chunk: list[Token], tokens: list[Token]) -> exp.Expression:
    try:
        # The parser reads positions from the tokens, so error lines and columns refer to `text`.
        expressions = _DIALECT.parser().parse(chunk, text)
    except ParseError as e:
        raise parse_error_to_arctic(e, text, tokens) from e
    except (
        AttributeError,
        IndexError,
        TypeError,
        ValueError,
    ) as e:  # sqlglot failing on a form it half knows
        line, column = line_and_column(text, chunk[0].start)
        raise SqlParseError(
            f"Invalid SQL: this statement's form is not supported here ({type(e).__name__})", line, column
        ) from e
    (expression,) = expressions
    assert isinstance(expression, exp.Expression), expression
    return expression
