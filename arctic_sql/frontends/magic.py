"""Jupyter/IPython magics: ``%load_ext arctic_sql``, then ``%%sql`` cells and ``%sql`` lines.

>>> %load_ext arctic_sql
>>> s = arctic_sql.connect(warehouse="./warehouse")
>>> %%sql
... SELECT * FROM db.t VERSION AS OF 2

A cell holds one or more ``;``-separated statements of arctic-sql's extended SQL; the last one's
rows are shown as a table (at most ``--limit`` rows, default 50). Options go on the magic's line:

- ``--session NAME``: the session variable to run on. Without it: the one used last, else the only
  arctic-sql session in the notebook, else a new ``arctic_sql.connect()`` (./warehouse), kept in
  ``arctic_sql_session``.
- ``--out NAME`` (``-o``): also store the result's Spark DataFrame in variable NAME.
- ``--limit N`` (``-l``): rows to show.

The line form returns the result, so ``rows = %sql SELECT ...`` works (``rows.rows``,
``rows.dataframe``). Errors show as one line (``UsageError: <message>``) without a traceback.
"""

from __future__ import annotations

import argparse
import html
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

try:
    from IPython.core.error import UsageError
    from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
except ImportError as e:  # a plain `pip install arctic-sql`: say which extra brings IPython
    from arctic_sql.extras import install_hint

    raise ImportError(install_hint("The %%sql magic (arctic_sql.frontends.magic)", "jupyter")) from e
from py4j.protocol import Py4JError
from pyspark.errors import PySparkException

from arctic_sql.errors import ArcticError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.session import Session

DEFAULT_LIMIT = 50
DEFAULT_SESSION_VARIABLE = "arctic_sql_session"


@dataclass
class SqlResult:
    """The first rows of a statement's result, rendered as a table by Jupyter (HTML) or as text."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    dataframe: DataFrame

    def _footer(self) -> str:
        n = len(self.rows)
        return f"first {n} rows shown" if self.truncated else f"{n} row{'' if n == 1 else 's'}"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_text(v))}</td>" for v in row) + "</tr>" for row in self.rows
        )
        return (
            f"<table class='arctic-sql'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<p><small>{self._footer()}</small></p>"
        )

    def __repr__(self) -> str:
        cells = [list(self.columns)] + [[_text(v) for v in row] for row in self.rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        lines = [" | ".join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
        lines.insert(1, "-+-".join("-" * w for w in widths))
        return "\n".join(lines + [f"({self._footer()})"])

    def to_pandas(self) -> Any:
        """The shown rows as a pandas DataFrame (``.dataframe.toPandas()`` for all of them)."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.columns)


def _text(value: Any) -> str:
    return "NULL" if value is None else str(value)


def _arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="%%sql", add_help=False, exit_on_error=False)
    parser.add_argument("--session", "-s")
    parser.add_argument("--out", "-o")
    parser.add_argument("--limit", "-l", type=int, default=DEFAULT_LIMIT)
    return parser


@magics_class
class ArcticSqlMagics(Magics):
    """The ``sql`` line and cell magic."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._session_name: str | None = None

    @no_var_expand  # the SQL runs as typed: IPython would otherwise put Python values in for $x and {x}
    @line_cell_magic
    def sql(self, line: str, cell: str | None = None) -> SqlResult | None:
        if cell is None:  # line magic: options first, then the statement
            options, statement = self._split_line(line)
        else:
            options, statement = self._options(line), cell
        if not statement.strip():
            raise UsageError("%%sql needs a SQL statement")
        session = self._session(options.session)
        try:
            df = session.sql(statement)
            if options.out:
                assert self.shell is not None  # a magic runs in a shell
                self.shell.user_ns[options.out] = df
            if not df.columns:
                return None
            fetched = df.limit(options.limit + 1).collect() if options.limit >= 0 else df.collect()
        except ArcticError as e:
            raise UsageError(str(e)) from None
        except (PySparkException, Py4JError) as e:  # Spark errors raised while collecting rows
            from arctic_sql.spark import translate

            raise UsageError(str(translate(e))) from None
        truncated = 0 <= options.limit < len(fetched)
        rows = [tuple(r) for r in fetched[: options.limit if truncated else None]]
        return SqlResult(list(df.columns), rows, truncated, df)

    # options and sessions --------------------------------------------------------------------
    def _options(self, text: str) -> argparse.Namespace:
        try:
            options, extra = _arg_parser().parse_known_args(shlex.split(text))
        except (argparse.ArgumentError, ValueError) as e:
            raise UsageError(f"%%sql options: {e}") from None
        if extra:
            raise UsageError(f"%%sql: unknown options {' '.join(extra)} (use --session, --out, --limit)")
        return options

    def _split_line(self, line: str) -> tuple[argparse.Namespace, str]:
        words = line.split()
        taking = {"--session", "-s", "--out", "-o", "--limit", "-l"}
        i = 0
        while i < len(words) and words[i] in taking:
            i += 2
        return self._options(" ".join(words[:i])), " ".join(words[i:])

    def _session(self, name: str | None) -> Session:
        from arctic_sql.session import Session

        assert self.shell is not None  # a magic runs in a shell
        namespace = self.shell.user_ns
        if name is not None:
            found = namespace.get(name)
            if not isinstance(found, Session):
                raise UsageError(f"{name} is not an arctic-sql session (arctic_sql.connect(...))")
            self._session_name = name
            return found
        if self._session_name is not None and isinstance(namespace.get(self._session_name), Session):
            return namespace[self._session_name]
        candidates = [k for k, v in namespace.items() if isinstance(v, Session) and not k.startswith("_")]
        if len({id(namespace[k]) for k in candidates}) > 1:
            raise UsageError(
                f"Several arctic-sql sessions ({', '.join(sorted(candidates))}): pick one with --session"
            )
        if candidates:
            self._session_name = candidates[0]
            return namespace[candidates[0]]
        import arctic_sql

        namespace[DEFAULT_SESSION_VARIABLE] = arctic_sql.connect()
        self._session_name = DEFAULT_SESSION_VARIABLE
        return namespace[DEFAULT_SESSION_VARIABLE]


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(ArcticSqlMagics)
