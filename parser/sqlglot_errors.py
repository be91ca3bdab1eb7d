"""Translate sqlglot's tokenizer and parser errors into :class:`SqlParseError`.

sqlglot's messages span several lines, carry terminal colour codes and report the column where
the offending token *ends*. Users get one line naming the problem and the line and column where
the offending text *starts*, counted in the whole text they submitted.
"""

from __future__ import annotations

import re

from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token

from arctic_sql.errors import SqlParseError

# "Missing ' from 2:17": sqlglot's inner tokenizer error; 17 is an offset into the text.
_MISSING_DELIMITER = re.compile(r"Missing (?P<delimiter>.+) from \d+:(?P<offset>\d+)$")
_BAD_NUMBER = re.compile(r"Numeric string contains invalid characters from \d+:(?P<offset>\d+)$")
# "<class 'sqlglot.expressions.query.Where'>" in "Required keyword: 'this' missing for ...".
_CLASS_REPR = re.compile(r"<class '(?:\w+\.)*(?P<name>\w+)'>")
# "but got <Token token_type: TokenType.SENTINEL, text: SENTINEL, ...>": the end of the text.
_END_TOKEN = re.compile(r"but got <Token token_type: TokenType\.SENTINEL[^>]*>")
# "but got <Token token_type: TokenType.X, text: abc, ...>": show the text only.
_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.\w+, text: (?P<text>.*?), line: \d+.*?>")
_MISSING_ARG = re.compile(r"Required keyword: '\w+' missing for (?P<name>\w+)")


def line_and_column(text: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of a character offset into ``text``."""
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def parse_error_to_arctic(error: ParseError, text: str, tokens: list[Token]) -> SqlParseError:
    """The first problem of a sqlglot ``ParseError``, placed at the start of its token."""
    details = error.errors[0] if error.errors else {}
    description = details.get("description") or str(error).splitlines()[0]
    description = _CLASS_REPR.sub(r"\g<name>", description)
    description = _END_TOKEN.sub("but the statement ended", description)
    description = _TOKEN_REPR.sub(lambda m: f"'{m['text']}'", description)
    description = _MISSING_ARG.sub(lambda m: f"incomplete {m['name'].lower()} expression", description)
    line, column = details.get("line"), details.get("col")
    token = next((tok for tok in tokens if tok.line == line and tok.col == column), None)
    if token is not None:
        line, column = line_and_column(text, token.start)
    return SqlParseError(f"Invalid SQL: {description}", line, column)


def token_error_to_arctic(error: TokenError, text: str) -> SqlParseError:
    """A sqlglot ``TokenError``: an unterminated string, identifier or comment, or a bad number."""
    cause = str(error.__cause__ or "")
    if match := _MISSING_DELIMITER.match(cause):
        problem = f"missing closing {match['delimiter']}"
        offset = int(match["offset"])
    elif match := _BAD_NUMBER.match(cause):
        problem = "invalid characters in a numeric literal"
        offset = int(match["offset"])
    elif isinstance(error.__cause__, IndexError):
        # The tokenizer read past the end of the text: a comment that is never closed.
        problem = "unexpected end of text (unclosed comment?)"
        offset = len(text)
    else:
        return SqlParseError(f"Invalid SQL: {str(error).splitlines()[0]}")
    line, column = line_and_column(text, min(offset, len(text)))
    return SqlParseError(f"Invalid SQL: {problem}", line, column)
