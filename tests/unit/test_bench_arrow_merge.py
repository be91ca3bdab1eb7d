"""The benchmarks' pyarrow merge (L1 and merge_on_read's limit) applies arctic-sql's merge rule.

``benchmarks/`` is not installed with the package, so the module is loaded from its file.
"""

import importlib.util
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "arrow_merge.py")
_spec = importlib.util.spec_from_file_location("bench_arrow_merge", _PATH)
arrow_merge = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(arrow_merge)


def _write(tmp_path, name, ids, values):
    path = str(tmp_path / name)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(values, pa.string())}), path)
    return path


def _rows(table):
    return sorted(zip(table["id"].to_pylist(), table["v"].to_pylist(), strict=True))


def test_newest_change_wins_and_a_winning_delete_drops_the_key(tmp_path):
    base = _write(tmp_path, "base.parquet", [1, 2, 3, 4], ["b1", "b2", "b3", "b4"])
    older = _write(tmp_path, "t2.parquet", [1, 2, 5], ["u1-old", "u2", "u5-old"])
    deletes = _write(tmp_path, "t3-delete.parquet", [2, 3, 5], [None, None, None])
    newer = _write(tmp_path, "t4.parquet", [1, 5, 6], ["u1-new", "u5-new", "u6"])
    # File order must not matter: only the transaction numbers do.
    merged = arrow_merge.merge(
        [base], [("file://" + newer, 4, False), (older, 2, False), (deletes, 3, True)], "id"
    )
    assert _rows(merged) == [(1, "u1-new"), (4, "b4"), (5, "u5-new"), (6, "u6")]


def test_change_files_without_a_base_and_a_column_subset(tmp_path):
    upserts = _write(tmp_path, "t1.parquet", [7, 8], ["a", "b"])
    deletes = _write(tmp_path, "t2-delete.parquet", [8], [None])
    merged = arrow_merge.merge([], [(upserts, 1, False), (deletes, 2, True)], "id", ["id"])
    assert merged.column_names == ["id"]
    assert merged["id"].to_pylist() == [7]


def test_nothing_to_merge_is_an_error():
    with pytest.raises(ValueError, match="nothing to merge"):
        arrow_merge.merge([], [], "id")


def test_run_plan_writes_one_sorted_file_per_node(tmp_path):
    base = _write(tmp_path, "base.parquet", [9, 3, 6], ["b9", "b3", "b6"])
    change = _write(tmp_path, "c.parquet", [3, 10], ["u3", "u10"])
    plan = {
        "key": "id",
        "nodes": {
            "5": {"base": [base], "change": [[change, 2, False]]},
            "4": {"base": [], "change": [[change, 1, False]]},
        },
    }
    out = tmp_path / "out"
    result = arrow_merge.run_plan(plan, str(out))
    assert result["files"] == 2 and result["rows"] == 4 + 2
    node5 = pq.read_table(out / "arctic_node=5" / "part-00000.parquet")
    assert node5["id"].to_pylist() == [3, 6, 9, 10]
    assert node5["v"].to_pylist() == ["u3", "b6", "b9", "u10"]
    assert result["bytes_written"] == sum(f.stat().st_size for f in out.rglob("*.parquet"))
