"""The interactive shell's history keeps a statement typed over several lines as one entry, on the
real readline module, across a save and a load."""

from __future__ import annotations

import pytest

from arctic_sql.frontends.shell_history import HEADER, History

readline = pytest.importorskip("readline")


@pytest.fixture
def history(tmp_path):
    readline.clear_history()
    yield History(readline, str(tmp_path / "history"), length=3)
    readline.clear_history()


def type_lines(*lines: str) -> None:
    """What input() does with each line it reads: readline adds it to the history."""
    for line in lines:
        readline.add_history(line)


def test_the_lines_of_a_statement_become_one_entry(history):
    type_lines("SELECT 1;")
    mark = history.mark()
    type_lines("SELECT v  -- the value; not the key", "FROM t", "WHERE id = 2;")
    history.keep_as_one(mark, "SELECT v  -- the value; not the key\nFROM t\nWHERE id = 2;\n")
    assert history.entries() == ["SELECT 1;", "SELECT v  -- the value; not the key\nFROM t\nWHERE id = 2;"]


def test_a_statement_repeated_is_kept_once(history):
    type_lines("SELECT 1", "FROM t;")
    history.keep_as_one(0, "SELECT 1\nFROM t;\n")
    mark = history.mark()
    type_lines("SELECT 1", "FROM t;")
    history.keep_as_one(mark, "SELECT 1\nFROM t;\n")
    assert history.entries() == ["SELECT 1\nFROM t;"]


def test_multi_line_entries_survive_a_save_and_a_load_and_the_length_is_kept(history, tmp_path):
    for entry in ["SELECT 1;", "SELECT a\nFROM t;", "SELECT 'x\\ny';", "SELECT 4;"]:
        type_lines(entry)
    history.save()
    assert (tmp_path / "history").read_text(encoding="utf-8").splitlines()[0] == HEADER
    readline.clear_history()
    History(readline, str(tmp_path / "history"), length=3).load()
    assert History(readline, "", 3).entries() == ["SELECT a\nFROM t;", "SELECT 'x\\ny';", "SELECT 4;"]


def test_a_history_file_readline_wrote_is_read_one_entry_per_line(history, tmp_path):
    (tmp_path / "history").write_text("SELECT 1;\nSHOW TABLES;\n", encoding="utf-8")
    history.load()
    assert history.entries() == ["SELECT 1;", "SHOW TABLES;"]
