"""The ``arctic-sql`` command-line shell: a spark-sql style front end for arctic tables.

>>> main(["--warehouse", "/tmp/wh", "-e", "SHOW DATABASES"])  # doctest: +SKIP
+-----------+
| namespace |
...

Arguments are checked, and any ``-e``/``-f`` script read and split into statements, before Spark starts.
Every statement of a script is checked before any runs (:mod:`arctic_sql.frontends.script_check`). Spark's own
console output (JVM logging, progress bars) goes to a scratch file,
never to the terminal; the shell reports every problem as one ``Error: <message>`` line on stderr.
"""

from __future__ import annotations

import argparse
import base64
import csv
import datetime as dt
import json
import logging
import math
import os
import re
import sys
import tempfile
import time
import traceback
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import IO, TYPE_CHECKING, Any

from arctic_sql.options import add_connect_arguments, check_connect_args, connect_options
from arctic_sql.spark import error_message

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.frontends.script_check import ScriptStatement
    from arctic_sql.frontends.shell_history import History
    from arctic_sql.session import Session

PROG = "arctic-sql"
PROMPT = f"{PROG}> "
CONTINUATION_PROMPT = " " * len(PROG) + "> "
HISTORY_FILE = "~/.arctic_sql_history"
HISTORY_LENGTH = 1000
OUTPUT_FORMATS = ("table", "csv", "json")
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

_EPILOG = f"""\
what runs:
  -f FILE and -e SQL run their statements in order, FILE first, then SQL. Every statement is
  checked before any runs, by arctic-sql's parser and Spark's: a statement they do not accept runs
  nothing and is reported as `Error in statement N (line L): ...` (an unclosed string or comment,
  or a first word no statement starts with, is found before Spark starts); then the first
  statement that fails stops the run (exit code 1).
  Without -f or -e, statements are read from standard input: on a terminal an interactive shell
  (history in {HISTORY_FILE}, a statement typed over several lines kept as one entry; `quit;`,
  `exit;` or Ctrl-D leave; Ctrl-C clears the statement being typed); otherwise the input up to
  its end (or a `quit;` line) is one script, checked as above, whose statements then run one
  after another, going on after a failed statement (exit code 1 at the end if any failed).
  A statement ends at a `;` outside strings and comments.

output:
  Each statement that returns columns prints its rows: `table` is an aligned text table with a
  `(N rows)` footer, NULL shown as NULL; `csv` has a header row, NULL as an empty field; `json`
  prints one object per row (JSON lines), with decimals, dates and timestamps as strings.
  Statements without columns print nothing (`OK` in the interactive shell). With `table`, as in
  spark-sql, each statement is followed on stderr by `Time taken: S seconds[, Fetched N row(s)]`
  (-S leaves it out); csv and json print nothing but the rows.

catalog:
  By default a pyiceberg SQL catalog on SQLite inside --warehouse. --catalog-uri URI uses the
  pyiceberg SQL catalog at URI (sqlite:////abs/cat.db, postgresql+psycopg2://...) with table data
  under --warehouse. Other catalogs: --catalog-type rest|hive|glue|sql plus --catalog-prop
  key=value (repeatable), passed to pyiceberg's load_catalog as they are. --catalog-config FILE
  reads them from a pyiceberg YAML file instead (catalog: {{arctic: {{...}}}}): credentials stay off
  the command line.

spark:
  --master local[N] (default: $ARCTIC_SPARK_MASTER, else local[*]) or a cluster: spark://HOST:7077,
  yarn, k8s://URL (client mode; the warehouse must be on storage every node reaches). --conf
  key=value (repeatable) sets any Spark setting. The catalog and spark options are the same for
  `arctic-sql optimizer`, `arctic-sql thriftserver` and `python -m arctic_sql.demo`.

exit codes: 0 success, 1 a statement or the connection failed, 2 bad arguments, 130 interrupted.
"""


# arguments --------------------------------------------------------------------------------------


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run SQL on arctic-sql primary-key lakehouse tables (Spark + Iceberg).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connect_arguments(parser)
    parser.add_argument("-e", dest="execute", metavar="SQL", help="run these ;-separated statements and exit")
    parser.add_argument("-f", dest="file", metavar="FILE", help="run the statements in FILE and exit")
    parser.add_argument(
        "--output", choices=OUTPUT_FORMATS, default="table", help="result format (default: table)"
    )
    parser.add_argument("--database", metavar="DB", help="database to use first (must exist)")
    parser.add_argument(
        "-S", "--silent", action="store_true", help="no `Time taken` line after each statement"
    )
    parser.add_argument(
        "--debug", action="store_true", help="show stack traces, Python warnings and Spark's console output"
    )
    return parser


# rendering values --------------------------------------------------------------------------------


def value_text(value: Any) -> str:
    """A non-null value as the table and csv formats show it (nested values as compact JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
        return text.rstrip("0") if value.microsecond else text
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (list, tuple, dict)):
        return _compact_json(json_value(value))
    return str(value)


def json_value(value: Any) -> Any:
    """``value`` as a JSON-ready object: numbers, strings, booleans, null, lists and objects."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _float_text(value)
    if isinstance(value, dict):
        return {("null" if k is None else value_text(k)): json_value(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "__fields__"):  # a pyspark Row: a struct
        return {name: json_value(v) for name, v in zip(value.__fields__, value)}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return value_text(value)


def _float_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# result formats ----------------------------------------------------------------------------------

_CELL_ESCAPES = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})


def format_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], right_aligned: Sequence[bool] | None = None
) -> str:
    """An aligned text table with a header and a ``(N rows)`` footer.

    >>> print(format_table(["id", "v"], [(1, "a"), (20, None)], [True, False]))
    +----+------+
    | id | v    |
    +----+------+
    |  1 | a    |
    | 20 | NULL |
    +----+------+
    (2 rows)
    """
    right = list(right_aligned) if right_aligned is not None else [False] * len(columns)
    header = [str(c).translate(_CELL_ESCAPES) for c in columns]
    cells = [["NULL" if v is None else value_text(v).translate(_CELL_ESCAPES) for v in row] for row in rows]
    widths = [_display_width(h) for h in header]
    for row in cells:
        widths = [max(w, _display_width(c)) for w, c in zip(widths, row)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(values: Sequence[str], align: Sequence[bool]) -> str:
        return "|" + "|".join(f" {_pad(v, w, a)} " for v, w, a in zip(values, widths, align)) + "|"

    lines = [rule, line(header, [False] * len(header)), rule]
    lines += [line(row, right) for row in cells]
    lines += [rule, f"({len(cells)} {'row' if len(cells) == 1 else 'rows'})"]
    return "\n".join(lines)


def _display_width(text: str) -> int:
    """Terminal columns: East Asian wide characters take two, combining marks none."""
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * (width - _display_width(text))
    return fill + text if right else text + fill


def write_csv(columns: Sequence[str], rows: Iterable[Sequence[Any]], out: IO[str]) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else value_text(v) for v in row])


def write_json_lines(columns: Sequence[str], rows: Iterable[Sequence[Any]], out: IO[str]) -> None:
    keys = [json.dumps(str(c), ensure_ascii=False) for c in columns]
    for row in rows:
        # Built by hand so that duplicate column names (SELECT 1 AS a, 2 AS a) are all kept.
        out.write("{" + ",".join(f"{k}:{_compact_json(json_value(v))}" for k, v in zip(keys, row)) + "}\n")


def write_result(df: DataFrame, output: str, out: IO[str]) -> int | None:
    """Print ``df`` in ``output`` format and return its row count; ``None`` (and nothing printed)
    when it has no columns."""
    fields = df.schema.fields
    if not fields:
        return None
    columns = [f.name for f in fields]
    if output == "table":
        from pyspark.sql.types import NumericType

        right = [isinstance(f.dataType, NumericType) for f in fields]
        rows = df.collect()
        out.write(format_table(columns, rows, right) + "\n")
        count = len(rows)
    else:
        counted = _Counted(df.toLocalIterator())
        (write_csv if output == "csv" else write_json_lines)(columns, counted, out)
        count = counted.count
    out.flush()
    return count


class _Counted:
    """Iterates over ``items``, counting them."""

    def __init__(self, items: Iterable[Any]) -> None:
        self._items = items
        self.count = 0

    def __iter__(self) -> Iterator[Any]:
        for item in self._items:
            self.count += 1
            yield item


def time_taken(seconds: float, rows: int | None) -> str:
    """spark-sql's line after a statement: ``Fetched`` only when rows came back.

    >>> time_taken(1.23449, 2), time_taken(0.5, 0)
    ('Time taken: 1.234 seconds, Fetched 2 row(s)', 'Time taken: 0.500 seconds')
    """
    fetched = f", Fetched {rows} row(s)" if rows else ""
    return f"Time taken: {seconds:.3f} seconds{fetched}"


# statements -----------------------------------------------------------------------------------

_UNCLOSED = re.compile(r"missing closing|unclosed comment")


def statement_complete(text: str) -> bool:
    """Whether ``text`` ends with a ``;`` that closes a statement (not one inside a string or comment).

    >>> statement_complete("SELECT 1;"), statement_complete("SELECT ';"), statement_complete("SELECT 1 -- ;")
    (True, False, False)
    """
    from sqlglot.tokens import TokenType

    from arctic_sql.errors import SqlParseError
    from arctic_sql.parser import Arctic, parse

    try:
        tokens = Arctic().tokenize(text)
    except Exception:  # noqa: BLE001 - sqlglot's TokenError; parse() says what it was
        try:
            parse(text)
        except SqlParseError as e:
            if _UNCLOSED.search(str(e)):
                return False
        return text.rstrip().endswith(";")  # a bad token: let the parse error show at the `;`
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON


class Shell:
    """Runs statements on a lazily opened session, printing results and one-line errors."""

    def __init__(self, args: argparse.Namespace, out: IO[str] = sys.stdout, err: IO[str] = sys.stderr):
        self.args = args
        self.out = out
        self.err = err
        self._session: Session | None = None
        self._jvm_log: IO[bytes] | None = None

    # session ---------------------------------------------------------------------------------
    @property
    def session(self) -> Session:
        if self._session is None:
            self._session = self._connect()
        return self._session

    def _connect(self) -> Session:
        import arctic_sql

        options = connect_options(self.args, {"spark.ui.showConsoleProgress": "false"})
        try:
            with self._jvm_output_hidden():
                session = arctic_sql.connect(**options)
        except Exception as e:
            raise _with_jvm_hint(e, self._jvm_log) from e
        if self.args.database is not None:
            # USE, not connect(database=...): a mistyped name is an error, not a new database.
            try:
                session.sql(f"USE {_quote_identifier(self.args.database)}")
            except Exception:
                session.stop()
                raise
        return session

    @contextmanager
    def _jvm_output_hidden(self) -> Iterator[None]:
        """Point file descriptor 2 at a scratch file while Spark starts, so the JVM (and every
        process it starts) writes its console logging and progress bars there for good."""
        if self.args.debug:
            yield
            return
        self._jvm_log = tempfile.TemporaryFile(prefix="arctic-sql-spark-")  # noqa: SIM115 - open until close()
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(self._jvm_log.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)

    def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            try:
                session.stop()
            except Exception:  # noqa: BLE001 - the work is done; a failing shutdown is not news
                if self.args.debug:
                    traceback.print_exc()
        if self._jvm_log is not None:
            self._jvm_log.close()

    # running ---------------------------------------------------------------------------------
    def run(self, sql: str, *, interactive: bool = False) -> bool:
        """Run one statement and print its result; ``False`` after printing its error."""
        started = time.monotonic()
        try:
            df = self.session.sql(sql)
            rows = write_result(df, self.args.output, self.out)
            if interactive and rows is None:
                self.out.write("OK\n")
                self.out.flush()
        except BrokenPipeError:
            raise
        except Exception as e:  # noqa: BLE001 - every failure is reported as one line
            self.report(e)
            return False
        if self.args.output == "table" and not self.args.silent:
            self.err.write(time_taken(time.monotonic() - started, rows) + "\n")
            self.err.flush()
        return True

    def report(self, error: BaseException, *, numbered: bool = True) -> None:
        """Print ``Error: <message>``, or for a script ``Error in statement N (line L): <message>``."""
        from arctic_sql.frontends.script_check import ScriptError

        self.out.flush()
        if self.args.debug:
            traceback.print_exception(error, file=self.err)
        if isinstance(error, ScriptError) and numbered:
            line = error.headline()
        else:
            line = f"Error: {error_message(error)}"
        self.err.write(line + "\n")
        self.err.flush()

    def check(self, text: str, statements: Sequence[ScriptStatement], source: str | None = None) -> None:
        """Raise :class:`~arctic_sql.frontends.script_check.ScriptError` unless every statement parses."""
        from arctic_sql.frontends.script_check import check_script, spark_parse_error

        check_script(
            text,
            statements,
            lambda sql: spark_parse_error(self.session.spark, sql),
            source,
            claimed=self.session.claims_unparsed,
            words=self.statement_words(),
        )

    def check_starts(self, statements: Sequence[ScriptStatement], source: str | None = None) -> None:
        """The check of every statement's first word, which needs no Spark (``SELEC 1``)."""
        from arctic_sql.frontends.script_check import check_statement_starts

        words = self.statement_words()
        if words is not None:
            check_statement_starts(statements, source, words)

    def statement_words(self) -> frozenset[str] | None:
        """The words a statement may start with; ``None`` (any word) when ``--conf
        spark.sql.extensions=...`` may add statements to Spark's parser."""
        from arctic_sql.frontends.script_check import STATEMENT_WORDS

        if any(key == "spark.sql.extensions" for key, _ in self.args.conf):
            return None
        return STATEMENT_WORDS

    def run_script(self, statements: Sequence[str], *, keep_going: bool = False) -> int:
        """Run checked statements in order; stop at the first failure unless ``keep_going``."""
        failed = False
        for statement in statements:
            if not self.run(statement):
                if not keep_going:
                    return EXIT_ERROR
                failed = True
        return EXIT_ERROR if failed else EXIT_OK

    def run_interactive(self, read_line: Callable[[str], str], history: History | None) -> int:
        """The read-eval-print loop on a terminal; ``read_line(prompt)`` raises EOFError at Ctrl-D."""
        for text in statement_texts(read_line, interactive=True, history=history):
            try:
                self.run_text(text)
            except KeyboardInterrupt:
                self.err.write("\nCancelled\n")
        return EXIT_OK

    def run_text(self, text: str) -> bool:
        """Check, then run every statement typed at the prompt; ``False`` if one failed."""
        from arctic_sql.frontends.script_check import split_script

        statements: list[ScriptStatement] = []
        try:
            statements = split_script(text)
            self.check(text, statements)
        except Exception as e:  # noqa: BLE001 - reported as one line
            self.report(e, numbered=len(statements) > 1)  # one statement typed: its number says nothing
            return False
        ok = True
        for statement in statements:
            ok &= self.run(statement.sql, interactive=True)
        return ok


def statement_texts(
    read_line: Callable[[str], str], *, interactive: bool, history: History | None = None
) -> Iterator[str]:
    """The input, one complete statement (or several on one line) at a time, up to its end or a
    `quit;`/`exit;` line. ``read_line(prompt)`` raises EOFError at the end of the input.

    On a terminal, Ctrl-C clears the statement being typed, and ``history`` keeps each statement as
    one entry; elsewhere the last statement may lack its `;`.
    """
    buffer = ""
    mark = history.mark() if history is not None else 0
    while True:
        try:
            line = read_line(CONTINUATION_PROMPT if buffer else PROMPT)
        except KeyboardInterrupt:
            if not interactive:
                raise
            sys.stdout.write("\n")
            buffer = ""
            mark = history.mark() if history is not None else 0
            continue
        except EOFError:
            if interactive:  # Ctrl-D leaves; a half-typed statement is dropped
                sys.stdout.write("\n")
            elif buffer:
                yield buffer
            return
        if not buffer and line.strip().rstrip(";").strip().lower() in ("quit", "exit"):
            return
        buffer += line if line.endswith("\n") else line + "\n"
        if not statement_complete(buffer):
            continue
        if history is not None:
            history.keep_as_one(mark, buffer)
        text, buffer = buffer, ""
        yield text
        mark = history.mark() if history is not None else 0


def _quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _with_jvm_hint(error: Exception, jvm_log: IO[bytes] | None) -> Exception:
    """When the JVM would not start, the first thing it said (JAVA_HOME not set, ...) says why."""
    if jvm_log is None or "JAVA_GATEWAY" not in str(error):
        return error
    jvm_log.seek(0)
    said = jvm_log.read().decode("utf-8", "replace").splitlines()
    cause = next((ln.strip() for ln in said if ln.strip() and not ln.startswith("WARNING")), None)
    if cause is None:
        return error
    from arctic_sql.errors import ArcticError

    return ArcticError(f"{error_message(error)} ({cause})")


# entry point ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Script:
    """The text of one input and the statements it splits into."""

    source: str | None
    """The -f file's name; ``None`` for -e and standard input."""
    text: str
    statements: list[ScriptStatement]


def read_scripts(args: argparse.Namespace, read_line: Callable[[str], str] | None = None) -> list[Script]:
    """The -f file, then -e; without either, standard input up to its end (or a `quit;` line).

    Each is split into statements here, before Spark starts: an unclosed string or comment raises
    :class:`~arctic_sql.frontends.script_check.ScriptError` (naming the file).
    """
    from arctic_sql.frontends.script_check import split_script

    inputs: list[tuple[str | None, str]] = []
    if args.file is not None:
        with open(args.file, encoding="utf-8") as f:
            inputs.append((args.file, f.read()))
    if args.execute is not None:
        inputs.append((None, args.execute))
    if not inputs:
        inputs.append((None, "".join(statement_texts(read_line or _stdin_lines(), interactive=False))))
    return [Script(source, text, split_script(text, source)) for source, text in inputs]


def _quiet_python(debug: bool) -> None:
    if debug:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        logging.getLogger("arctic_sql").setLevel(logging.DEBUG)
        return
    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)


def _stdin_lines() -> Callable[[str], str]:
    def read_line(prompt: str) -> str:
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line

    return read_line


# Long-running services are subcommands with their own arguments: `arctic-sql optimizer --help`.
SUBCOMMANDS = {
    "optimizer": "arctic_sql.frontends.optimizer_command",
    "thriftserver": "arctic_sql.thrift.server",
    "service": "arctic_sql.service.server",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``arctic-sql`` command; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        import importlib

        return importlib.import_module(SUBCOMMANDS[argv[0]]).main(argv[1:])
    parser = build_arg_parser()
    args = parser.parse_args(argv)
    check_connect_args(parser, args)
    _quiet_python(args.debug)
    shell = Shell(args)
    try:
        return _main(shell, args)
    except KeyboardInterrupt:
        sys.stderr.write("Error: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`arctic-sql ... | head`); don't let the flush at exit complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    finally:
        shell.close()


def _main(shell: Shell, args: argparse.Namespace) -> int:
    interactive = args.file is None and args.execute is None and sys.stdin.isatty()
    scripts: list[Script] = []
    try:
        if not interactive:
            scripts = read_scripts(args)  # an unclosed string or comment starts no Spark
            if not any(script.statements for script in scripts):
                return EXIT_OK
            for script in scripts:  # nor does a statement's unknown first word (SELEC 1)
                shell.check_starts(script.statements, script.source)
        else:
            sys.stderr.write(f"{PROG}: starting Spark...\n")
        shell.session  # noqa: B018 - connect now: a bad catalog fails before the first prompt
        for script in scripts:  # every statement of every input, before any runs
            shell.check(script.text, script.statements, script.source)
    except Exception as e:  # noqa: BLE001 - reported as one line
        shell.report(e)
        return EXIT_ERROR
    if not interactive:
        statements = [statement.sql for script in scripts for statement in script.statements]
        from_stdin = args.file is None and args.execute is None
        return shell.run_script(statements, keep_going=from_stdin)
    from arctic_sql.frontends.shell_history import History

    history = History.open(HISTORY_FILE, HISTORY_LENGTH)
    try:
        return shell.run_interactive(input, history)
    finally:
        if history is not None:
            history.save()


if __name__ == "__main__":
    sys.exit(main())
