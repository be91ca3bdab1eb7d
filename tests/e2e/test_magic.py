"""``%load_ext arctic_sql``: the ``%%sql``/``%sql`` magics in a real IPython shell on the shared Spark."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


@pytest.fixture
def shell(arctic):
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    ip.run_line_magic("load_ext", "arctic_sql")
    ip.magics_manager.registry["ArcticSqlMagics"]._session_name = None  # forget the previous test's session
    ip.user_ns.clear()
    ip.user_ns["s"] = arctic
    yield ip
    ip.user_ns.clear()


def test_cell_magic_runs_extended_sql_and_renders_a_table(shell):
    assert (
        shell.run_cell_magic(
            "sql",
            "",
            """
        CREATE TABLE db.m (id BIGINT, v STRING, PRIMARY KEY (id));
        INSERT INTO db.m VALUES (1, 'a'), (2, '<b>')
    """,
        )
        is None
    )  # no columns, nothing to show
    shell.run_cell_magic("sql", "", "INSERT INTO db.m VALUES (1, 'a2')")
    result = shell.run_cell_magic("sql", "--out df", "SELECT id, v FROM db.m ORDER BY id")
    assert result.columns == ["id", "v"] and result.rows == [(1, "a2"), (2, "<b>")]
    html = result._repr_html_()
    assert "<th>id</th>" in html and "<td>&lt;b&gt;</td>" in html and "2 rows" in html
    assert shell.user_ns["df"].count() == 2
    old = shell.run_line_magic("sql", "SELECT v FROM db.m VERSION AS OF 1 WHERE id = 1")
    assert old.rows == [("a",)]
    assert "a" in repr(old).splitlines()[2]


def test_limit_truncates_what_is_shown(shell):
    result = shell.run_cell_magic("sql", "--limit 3", "SELECT id FROM range(10)")
    assert len(result.rows) == 3 and result.truncated
    assert "first 3 rows shown" in result._repr_html_()


def test_errors_are_one_line_usage_errors(shell):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError) as missing:
        shell.run_cell_magic("sql", "", "SELECT * FROM db.no_such_table")
    assert "no_such_table" in str(missing.value) and "\n" not in str(missing.value)
    with pytest.raises(UsageError, match="unknown options"):
        shell.run_cell_magic("sql", "--bogus", "SELECT 1")
    with pytest.raises(UsageError, match="not an arctic-sql session"):
        shell.run_cell_magic("sql", "--session nothing_here", "SELECT 1")


def test_session_is_picked_explicitly_when_there_are_several(shell, spark, tmp_path):
    from IPython.core.error import UsageError

    import arctic_sql

    shell.user_ns["other"] = arctic_sql.connect(warehouse=str(tmp_path / "other"), spark=spark)
    with pytest.raises(UsageError, match="Several arctic-sql sessions"):
        shell.run_cell_magic("sql", "", "SHOW TABLES IN db")
    shell.run_cell_magic("sql", "--session other", "CREATE DATABASE db2")
    shell.run_cell_magic(
        "sql", "--session other", "CREATE TABLE db2.only_in_other (id INT, PRIMARY KEY (id))"
    )
    shown = shell.run_cell_magic("sql", "", "SHOW TABLES IN db2")  # the session used last
    assert [r[1] for r in shown.rows] == ["only_in_other"]
    assert shell.run_cell_magic("sql", "--session s", "SHOW TABLES IN db2").rows == []  # not s's table


def test_the_line_magic_runs_the_sql_as_typed_without_putting_python_values_in(shell):
    shell.user_ns.update(price=5, user="bob")  # run_line_magic is what `%sql ...` in a cell calls
    shell.run_line_magic("sql", "CREATE TABLE db.notes (id INT, txt STRING, PRIMARY KEY (id))")
    shell.run_line_magic("sql", "INSERT INTO db.notes VALUES (1, 'costs $price'), (2, 'template {user}')")
    result = shell.run_line_magic("sql", "SELECT * FROM db.notes ORDER BY id")
    assert result.rows == [(1, "costs $price"), (2, "template {user}")]
