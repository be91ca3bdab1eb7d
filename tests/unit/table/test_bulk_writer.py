"""The driver-free halves of the bulk writer: the key check on a task's sorted rows and the folder runs."""

from __future__ import annotations

import pyarrow as pa

from arctic_sql.table.bulk_writer import directory_runs, key_problem

WHAT = "OVERWRITE into db.t"


def test_key_problem_names_a_repeated_composite_key_and_how_often():
    rows = pa.table({"a": [1, 1, 1, 1, 2], "b": ["x", "y", "y", "y", "y"]})
    assert key_problem(rows, ("a", "b"), WHAT) == \
        "OVERWRITE into db.t writes primary key (a=1, b='y') 3 times in one statement"
    assert key_problem(rows.slice(0, 2), ("a", "b"), WHAT) is None  # (1, x) and (1, y) differ
    assert key_problem(rows, (), WHAT) is None  # a table without a key has nothing to check


def test_key_problem_names_a_null_key_first():
    rows = pa.table({"a": [1, 1, None]})
    assert key_problem(rows, ("a",), WHAT) == "OVERWRITE into db.t writes a null primary key (a=NULL)"


def test_directory_runs_split_sorted_rows_by_every_directory_and_null():
    rows = pa.table({"arctic_p_0": ["eu", "eu", "us", None, None], "arctic_node": [4, 5, 5, 5, 5]})
    assert list(directory_runs(rows, ("arctic_p_0", "arctic_node"))) == [
        ("arctic_p_0=eu/arctic_node=4", 0, 1), ("arctic_p_0=eu/arctic_node=5", 1, 2),
        ("arctic_p_0=us/arctic_node=5", 2, 3), ("arctic_p_0=__HIVE_DEFAULT_PARTITION__/arctic_node=5", 3, 5)]
    assert list(directory_runs(rows, ())) == [("", 0, 5)]
