"""The exceptions arctic-sql raises.

Every error a user can cause derives from :class:`ArcticError` and carries a one-line message that
names the problem. Foreign exceptions (Spark, pyiceberg, sqlglot) are translated once, where they
cross into arctic-sql, with ``raise ... from e``.
"""

from __future__ import annotations


class ArcticError(Exception):
    """Root of every arctic-sql error."""

    def __init__(self, message: str) -> None:
        # One line, always: callers print it as ``Error: <message>``.
        super().__init__(" ".join(str(message).split()))

    @property
    def message(self) -> str:
        return str(self)


class SqlParseError(ArcticError):
    """The SQL text could not be parsed."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        self.line = line
        self.column = column
        where = f" (line {line}, column {column})" if line is not None and column is not None else ""
        super().__init__(f"{message}{where}")


class NoSuchTableError(ArcticError):
    """A table or view named in a statement does not exist."""


class IncompleteTableError(ArcticError):
    """A table lost one of its stores outside arctic-sql's control; DROP TABLE still removes it."""


class NoSuchDatabaseError(ArcticError):
    """A database (namespace) named in a statement does not exist."""


class TableAlreadyExistsError(ArcticError):
    """CREATE TABLE for a name that is taken."""


class InvalidArgumentError(ArcticError):
    """A statement, property, column or argument is not valid; nothing was changed."""


class NoSuchColumnError(InvalidArgumentError):
    """A column named in a statement does not exist in the table."""


class PrimaryKeyViolationError(InvalidArgumentError):
    """A write would store a null key, or names one key twice in a single statement."""


class UnsupportedOperationError(ArcticError):
    """The statement is valid SQL but not something arctic-sql does (yet)."""


class VersionNotFoundError(ArcticError):
    """A version or timestamp outside the retained history."""


class CommitConflictError(ArcticError):
    """A concurrent commit changed what this commit was based on; nothing was committed."""


class CommitStateUnknownError(ArcticError):
    """The catalog did not answer whether a commit landed; its files are kept."""


class ExecutionError(ArcticError):
    """Spark failed while running a statement (bad cast, division by zero, ...)."""
