"""The ``arctic-sql`` command run as a real process: -e, -f, output formats, errors, the stdin shell.

Every CLI process that needs Spark starts its own JVM, so the Spark-backed cases share one warehouse
(built once by the ``-e`` run). The cases that must fail before Spark starts run with JAVA_HOME
pointing nowhere (``NO_JAVA``), so that they would fail differently if Spark were started.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys

import pytest

from arctic_sql.frontends.cli import format_table, statement_complete

pytestmark = pytest.mark.spark

TIMEOUT = 900  # one JVM start plus a few small jobs; generous for a loaded machine

SETUP = (
    "CREATE DATABASE db; "
    "CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id)); "
    "INSERT INTO db.t VALUES (1,'a'),(2,'b'); "
    "INSERT INTO db.t VALUES (2,'c'); "
    "SELECT * FROM db.t ORDER BY id"
)

# Read by the csv and json runs with --database db: unqualified names resolve there.
SCRIPT = """\
SELECT id, v FROM t ORDER BY id;
-- a comment; with a semicolon
SELECT CAST(NULL AS STRING) AS n, CAST(2.50 AS DECIMAL(5, 2)) AS d, DATE'2024-02-29' AS day,
       TIMESTAMP'2024-01-01 10:00:00.5' AS ts, 'x;"y' AS s, 1.5D AS f, true AS ok
"""


# spark-sql's line after each statement with --output table, on stderr.
TIME_TAKEN = re.compile(r"Time taken: \d+\.\d{3} seconds(, Fetched [1-9]\d* row\(s\))?")


def errors_only(stderr: str) -> list[str]:
    """stderr without its ``Time taken`` lines."""
    return [line for line in stderr.splitlines() if not TIME_TAKEN.fullmatch(line)]


def run_cli(
    warehouse: str, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "arctic_sql.frontends.cli", "--warehouse", warehouse, *args],
        input=stdin if stdin is not None else "",
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})},
        timeout=TIMEOUT,
    )


# Spark cannot start with this: a run that passes with it never needed Spark.
NO_JAVA = {"JAVA_HOME": "/nonexistent/java"}


@pytest.fixture(scope="module")
def setup_run(tmp_path_factory):
    """A warehouse holding the upserted table db.t, and the -e run that built it."""
    warehouse = str(tmp_path_factory.mktemp("cli") / "warehouse")
    return warehouse, run_cli(warehouse, "-e", SETUP)


@pytest.fixture(scope="module")
def script_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli-script") / "queries.sql"
    path.write_text(SCRIPT, encoding="utf-8")
    return str(path)


def test_e_runs_statements_in_order_and_prints_only_results_as_a_table(setup_run):
    _, result = setup_run
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "+----+---+\n| id | v |\n+----+---+\n|  1 | a |\n|  2 | c |\n+----+---+\n(2 rows)\n"
    )
    # As spark-sql: a `Time taken` line per statement on stderr, `Fetched` when rows came back.
    lines = result.stderr.splitlines()
    assert len(lines) == 5 and all(TIME_TAKEN.fullmatch(line) for line in lines), result.stderr
    assert [line.partition(", ")[2] for line in lines] == ["", "", "", "", "Fetched 2 row(s)"]


def test_csv_output_of_a_file(setup_run, script_file):
    warehouse, _ = setup_run
    result = run_cli(warehouse, "--output", "csv", "--database", "db", "-f", script_file)
    assert result.returncode == 0, result.stderr
    assert list(csv.reader(io.StringIO(result.stdout))) == [
        ["id", "v"],
        ["1", "a"],
        ["2", "c"],
        ["n", "d", "day", "ts", "s", "f", "ok"],
        ["", "2.50", "2024-02-29", "2024-01-01 10:00:00.5", 'x;"y', "1.5", "true"],
    ]
    assert result.stderr == ""


def test_json_lines_output_of_a_file(setup_run, script_file):
    warehouse, _ = setup_run
    result = run_cli(warehouse, "--output", "json", "--database", "db", "-f", script_file)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "c"},
        {
            "n": None,
            "d": "2.50",
            "day": "2024-02-29",
            "ts": "2024-01-01 10:00:00.5",
            "s": 'x;"y',
            "f": 1.5,
            "ok": True,
        },
    ]
    assert result.stderr == ""  # no `Time taken` lines outside --output table


def test_a_failing_statement_stops_the_run_with_one_error_line(setup_run):
    warehouse, _ = setup_run
    result = run_cli(warehouse, "-e", "SELECT 41 AS before; SELECT * FROM db.nope; SELECT 43 AS after")
    assert result.returncode == 1
    assert "41" in result.stdout and "43" not in result.stdout
    lines = errors_only(result.stderr)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and "nope" in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


def test_shell_on_stdin_reads_multi_line_statements_and_continues_after_an_error(setup_run):
    warehouse, _ = setup_run
    session = (
        "USE db;\n"
        "SELECT v   -- the value; not the key\n"
        "FROM t\n"
        "WHERE id = 2;\n"
        "SELECT * FROM no_such_table;\n"
        "SELECT 'semi;colon' AS s,\n"
        "       count(*) AS n FROM db.t;\n"
        "quit;\n"
        "SELECT 'after quit' AS never;\n"
    )
    result = run_cli(warehouse, stdin=session)
    assert result.stdout == (
        "+---+\n"
        "| v |\n"
        "+---+\n"
        "| c |\n"
        "+---+\n"
        "(1 row)\n"
        "+------------+---+\n"
        "| s          | n |\n"
        "+------------+---+\n"
        "| semi;colon | 2 |\n"
        "+------------+---+\n"
        "(1 row)\n"
    )
    lines = errors_only(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "no_such_table" in lines[0], result.stderr
    assert result.returncode == 1  # a piped script that had a failing statement


def test_bad_output_format_is_a_usage_error():
    result = run_cli("/nonexistent/warehouse", "--output", "xml", "-e", "SELECT 1")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: arctic-sql")
    assert "invalid choice: 'xml'" in result.stderr
    assert result.stdout == ""


def test_statements_only_spark_parses_run_and_an_unparsable_one_on_an_arctic_table_runs_nothing(setup_run):
    warehouse, _ = setup_run
    result = run_cli(
        warehouse,
        "-e",
        "SET spark.sql.x.dir=/tmp/p; SET spark.sql.x.dir; "
        "SELECT 7 AS seven; SELECT * FROM db.t WHERE (id = 1",
    )
    assert result.returncode == 1
    assert result.stdout == "", result.stdout  # nothing ran, not even the SETs before it
    assert result.stderr == "Error in statement 4 (line 1): Invalid SQL: Expecting ) (line 1, column 100)\n"
    result = run_cli(warehouse, "--output", "csv", "-e", "SET spark.sql.x.dir=/tmp/p; SET spark.sql.x.dir")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "key,value\nspark.sql.x.dir,/tmp/p\n" * 2  # SET k=v prints the pair too


def test_a_syntax_error_anywhere_in_the_script_runs_nothing(tmp_path):
    result = run_cli(str(tmp_path / "warehouse"), "-e", "CREATE DATABASE made; SELECT 'unclosed")
    assert result.returncode == 1
    assert (
        result.stderr == "Error in statement 2 (line 1): Invalid SQL: missing closing ' (line 1, column 30)\n"
    )
    assert not (tmp_path / "warehouse").exists()  # no catalog was opened, so nothing was created


# the pieces without Spark -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "complete"),
    [
        ("SELECT 1;\n", True),
        ("SELECT 1;  -- done\n", True),
        ("SELECT 1\n", False),
        ("SELECT 1 -- not yet;\n", False),
        ("SELECT ';\n", False),
        ("SELECT 1 /* still ; open\n", False),
        ("SELECT `a;\n", False),
        ("SELECT 1 FROM;\n", True),  # complete, though it will not parse
        ("SELECT 1; SELECT\n", False),
    ],
)
def test_statement_complete(text, complete):
    assert statement_complete(text) is complete


def test_format_table_aligns_wide_characters_and_escapes_newlines():
    assert format_table(["k", "v"], [("漢字", "a\nb"), ("x", None)]).splitlines() == [
        "+------+------+",
        "| k    | v    |",
        "+------+------+",
        "| 漢字 | a\\nb |",
        "| x    | NULL |",
        "+------+------+",
        "(2 rows)",
    ]


# every statement is checked before any runs ------------------------------------------------------


def test_a_statement_only_spark_can_judge_is_checked_before_the_first_runs(setup_run):
    """sqlglot gives `... GROUP BY` with nothing after it a structure; Spark's parser refuses it: the
    SELECT before it must not run (it would, and the error would come after its rows)."""
    warehouse, _ = setup_run
    result = run_cli(warehouse, "-e", "SELECT 41 AS first; SELECT * FROM db.t GROUP BY")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        "Error in statement 2 (line 1): Invalid SQL: [PARSE_SYNTAX_ERROR] Syntax error "
    )
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_a_typo_in_a_statements_first_word_runs_nothing_and_starts_no_spark(tmp_path):
    result = run_cli(str(tmp_path / "warehouse"), "-e", "SELECT 41 AS first;\nSELEC 1", env=NO_JAVA)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "Error in statement 2 (line 2): Invalid SQL: no statement starts with 'SELEC' (did you mean SELECT?)\n"
    )
    assert not (tmp_path / "warehouse").exists()


def test_an_error_in_a_file_names_the_statement_its_line_and_the_file(setup_run, tmp_path):
    warehouse, _ = setup_run
    path = tmp_path / "broken.sql"
    path.write_text(
        "SELECT 41 AS first;\n-- the next one is broken\nSELECT id\nFROM db.t WHERE id = = 2;\nSELECT 43;\n"
    )
    result = run_cli(warehouse, "-f", str(path))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"Error in statement 2 (line 3) of {path}: Invalid SQL: "), result.stderr
    # arctic-sql's reason (Spark's parser refuses it too), placed in the whole file
    assert result.stderr.endswith("(line 4, column 22)\n") and len(result.stderr.splitlines()) == 1


def test_an_error_on_stdin_runs_nothing_and_names_the_statement_and_line(setup_run):
    warehouse, _ = setup_run
    script = "SELECT 41 AS first;\nSELECT 42\n  AS second;\nSELCT 43 AS third;\nSELECT 44;\n"
    result = run_cli(warehouse, stdin=script, env=NO_JAVA)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "Error in statement 3 (line 4): Invalid SQL: no statement starts with 'SELCT' (did you mean SELECT?)\n"
    )


def test_arctic_syntax_that_spark_cannot_parse_passes_the_check_and_silent_drops_time_taken(setup_run):
    """VERSION BETWEEN with get_latest_version() is arctic-sql's; Spark's parser refuses it."""
    warehouse, _ = setup_run
    sql = (
        "SELECT id, _change_type FROM db.t VERSION BETWEEN 0 AND get_latest_version('db.t') ORDER BY id;"
        "CALL system.optimize(table => 'db.t', dry_run => true)"
    )
    result = run_cli(warehouse, "-S", "-e", sql)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "+----+--------------+\n"
        "| id | _change_type |\n"
        "+----+--------------+\n"
        "|  1 | upsert       |\n"
        "|  2 | upsert       |\n"
        "+----+--------------+\n"
        "(2 rows)\n"
    ), result.stdout
    assert result.stderr == ""


def test_the_interactive_shell_keeps_a_multi_line_statement_as_one_history_entry(setup_run, tmp_path):
    """A real terminal (a pseudo-terminal), so the shell runs interactively with readline."""
    import select

    warehouse, _ = setup_run
    home = tmp_path / "home"
    home.mkdir()
    controller, terminal = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "arctic_sql.frontends.cli", "--warehouse", warehouse],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        close_fds=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "HOME": str(home)},
    )
    os.close(terminal)
    # Typed ahead: the terminal holds the lines until the shell's first prompt reads them.
    os.write(controller, b"SELECT v\n  FROM db.t\n  WHERE id = 2;\nquit;\n")
    output = b""
    try:
        while True:
            ready, _, _ = select.select([controller], [], [], TIMEOUT)
            assert ready, f"no output for {TIMEOUT} s: {output!r}"
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the shell exited and closed the terminal
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(controller)
        assert process.wait(timeout=TIMEOUT) == 0, output
    text = output.decode("utf-8", "replace")
    assert "| c |" in text and "Time taken: " in text, text
    lines = (home / ".arctic_sql_history").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines[1:]] == ["SELECT v\n  FROM db.t\n  WHERE id = 2;", "quit;"]
