"""The driver-free halves of the bulk writer: the key check on a task's sorted rows and the folder runs."""

from __future__ import annotations

import pyarrow as pa

from arctic_sql.table.writing.bulk_base_files import directory_runs, key_problem

WHAT = "OVERWRITE into db.t"


def test_key_problem_names_a_repeated_composite_key_and_how_often():
    rows = pa.table({"a": [1, 1, 1, 1, 2], "b": ["x", "y", "y", "y", "y"]})
    assert (
        key_problem(rows, ("a", "b"), WHAT)
        == "OVERWRITE into db.t writes primary key (a=1, b='y') 3 times in one statement"
    )
    assert key_problem(rows.slice(0, 2), ("a", "b"), WHAT) is None  # (1, x) and (1, y) differ
    assert key_problem(rows, (), WHAT) is None  # a table without a key has nothing to check


def test_key_problem_names_a_null_key_first():
    rows = pa.table({"a": [1, 1, None]})
    assert key_problem(rows, ("a",), WHAT) == "OVERWRITE into db.t writes a null primary key (a=NULL)"


def test_directory_runs_split_sorted_rows_by_every_directory_and_null():
    rows = pa.table({"arctic_p_0": ["eu", "eu", "us", None, None], "arctic_node": [4, 5, 5, 5, 5]})
    assert list(directory_runs(rows, ("arctic_p_0", "arctic_node"))) == [
        ("arctic_p_0=eu/arctic_node=4", 0, 1),
        ("arctic_p_0=eu/arctic_node=5", 1, 2),
        ("arctic_p_0=us/arctic_node=5", 2, 3),
        ("arctic_p_0=__HIVE_DEFAULT_PARTITION__/arctic_node=5", 3, 5),
    ]
    assert list(directory_runs(rows, ())) == [("", 0, 5)]


def test_a_streamed_task_writes_full_files_and_cuts_at_each_folder(tmp_path):
    """Batches cut anywhere still give files of at most max_rows, one folder each, rows in order."""
    import pyarrow.parquet as pq
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from arctic_sql.table.writing.arrow_files import WriteTarget
    from arctic_sql.table.writing.bulk_base_files import _streamed_task

    schema = Schema(NestedField(1, "id", LongType(), required=True))
    target = WriteTarget("base", str(tmp_path), schema, UNPARTITIONED_PARTITION_SPEC, ("id",), 4, max_rows=3)
    nodes = [4] * 7 + [5] * 2  # node 4: 7 rows (files of 3, 3, 1), node 5: 2 rows
    rows = pa.table({"id": list(range(9)), "arctic_node": nodes})
    batches = [rows.slice(0, 2), rows.slice(2, 4), rows.slice(6, 0), rows.slice(6, 3)]
    results = pa.Table.from_batches(
        [
            b
            for b in _streamed_task(
                target,
                ("arctic_node",),
                f"{tmp_path}/w",
                (
                    b
                    for t in batches
                    for b in t.to_batches() or [pa.RecordBatch.from_pylist([], schema=rows.schema)]
                ),
            )
        ]
    )
    assert results.column("problem").null_count == results.num_rows
    written = {p: pq.read_table(p).column("id").to_pylist() for p in results.column("path").to_pylist()}
    by_folder: dict[str, list[list[int]]] = {}
    for path, ids in sorted(written.items(), key=lambda kv: kv[1]):
        by_folder.setdefault(path.split("/")[-2], []).append(ids)
    assert by_folder == {"arctic_node=4": [[0, 1, 2], [3, 4, 5], [6]], "arctic_node=5": [[7, 8]]}
    assert results.column("rows").to_pylist() == [len(ids) for ids in written.values()]
