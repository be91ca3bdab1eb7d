"""The exceptions arctic-sql raises.

Every error a user can cause derives from :class:`ArcticError` and carries a one-line message that
names the problem. Foreign exceptions (Spark, pyiceberg, sqlglot) are translated once, where they
cross into arctic-sql, with ``raise ... from e``.
"""

from __future__ import annotations

import re


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


def report(error: ArcticError) -> str:
    """``error`` as one line a Spark task hands back to the driver (``from_report`` reads it)."""
    return f"{type(error).__name__}: {error}"


def from_report(text: str) -> ArcticError:
    """The error a task's ``report`` line names (an ExecutionError holding the line if it names none)."""
    name, _, message = text.partition(": ")
    return by_name(name, message) or ExecutionError(text)


def by_name(name: str, message: str) -> ArcticError | None:
    """The arctic-sql error class ``name`` holding ``message`` (as a worker process reports one), or
    None if ``name`` names none."""
    kind = globals().get(name)
    if isinstance(kind, type) and issubclass(kind, ArcticError):
        return kind(message)
    return None


# Describing a failure that is recorded rather than shown at once (optimizing and maintenance runs) -------
_SUMMARY_LIMIT = 600
# "Caused by: java.io.FileNotFoundException: ..." or a Python traceback's last line "OSError: ...".
_CAUSE = re.compile(r"^(?:Caused by: )?(?:[\w$]+\.)*([\w$]*(?:Error|Exception|Fault)\w*): (.+)$")
_WRAPPERS = ("Py4JJavaError", "SparkException", "PythonException", "ExecutionError")


def _chain(e: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = e
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return found


def full_message(e: BaseException) -> str:
    """Every message of ``e`` and its causes, outermost first (a Spark failure's JVM trace included)."""
    parts: list[str] = []
    for x in _chain(e):
        text = str(x).strip()
        if not any(text and text in p for p in parts):
            parts.append(f"{type(x).__name__}: {text}" if text else type(x).__name__)
    return "\n\nCaused by: ".join(parts)


def failure_summary(e: BaseException) -> str:
    """One line that says what failed and why: the outermost message's first line, then the deepest
    cause named in the whole text (the last ``SomeError: message`` line of a Python traceback or a
    JVM's ``Caused by:``), wrappers such as ``Py4JJavaError: An error occurred while calling`` skipped.

    >>> try:
    ...     try:
    ...         raise FileNotFoundError("no such file: x.parquet")
    ...     except OSError as inner:
    ...         raise ExecutionError("Optimizing db.t failed") from inner
    ... except ExecutionError as outer:
    ...     failure_summary(outer)
    'Optimizing db.t failed: FileNotFoundError: no such file: x.parquet'
    """
    lines = [line.strip() for line in full_message(e).splitlines() if line.strip()]
    head = " ".join(str(e).split("\n", 1)[0].split()) or type(e).__name__
    cause = None
    for line in lines:
        match = _CAUSE.match(line)
        if match and match.group(1) not in _WRAPPERS and not match.group(2).startswith("Traceback"):
            cause = f"{match.group(1)}: {match.group(2)}"
    summary = head if cause is None or cause.split(": ", 1)[1] in head else f"{head}: {cause}"
    summary = " ".join(summary.split())
    return summary if len(summary) <= _SUMMARY_LIMIT else summary[: _SUMMARY_LIMIT - 1] + "…"


_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+.*$")


def one_line(error: BaseException) -> str:
    """The first line of a Spark (or any py4j) error, without its SQLSTATE suffix and plan dump; for an error the
    JVM raised under a py4j call (``An error occurred while calling o209.parquet.``), its Java
    exception's line instead (``UnsupportedFileSystemException: No FileSystem for scheme "s3"``),
    taken from py4j's ``java_exception`` when the error carries it (the Java exception's own
    ``toString``, without fetching its stack trace)."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        first = next((line.strip() for line in str(java).splitlines() if line.strip()), "")
        return _SQLSTATE.sub("", _JAVA_PACKAGE.sub("", first)).strip() or type(error).__name__
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    text = lines[0]
    if _PY4J_CALL.match(text) and len(lines) > 1 and lines[1].startswith(": "):
        text = _JAVA_PACKAGE.sub("", lines[1][2:])
    return _SQLSTATE.sub("", text).strip()


# py4j's first line of an error the JVM raised, and the package of the Java exception after it.
_PY4J_CALL = re.compile(r"^An error occurred while calling [\w$.]+\.?$")
_JAVA_PACKAGE = re.compile(r"^(?:[a-z_][\w$]*\.)+(?=[A-Z][\w$]*(?::|$))")
