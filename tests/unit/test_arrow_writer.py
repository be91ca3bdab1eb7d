"""The Arrow writer without Spark: tree nodes by Spark's hash, Spark's folder layout, one change per key."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg import types as it
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform

from arctic_sql.errors import InvalidArgumentError, PrimaryKeyViolationError
from arctic_sql.table.format.keyhash import spark_xxhash64
from arctic_sql.table.format.keyhash_arrow import node_ids
from arctic_sql.table.format.keyhash_arrow import spark_xxhash64 as vector_hash
from arctic_sql.table.format.statistics import statistics_columns
from arctic_sql.table.writing.arrow_files import WriteTarget, escape_path_name, write_table
from arctic_sql.table.writing.arrow_tasks import CHANGES, WritePlan, resolve_across_files, write_task
from arctic_sql.table.writing.change_kinds import check_appends, newest_per_key

SCHEMA = Schema(
    it.NestedField(1, "id", it.LongType(), required=True),
    it.NestedField(2, "v", it.StringType(), required=False),
    it.NestedField(3, "day", it.StringType(), required=True),
    identifier_field_ids=[1, 3],
)
SPEC = PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "day"))


def _target(tmp_path, max_rows=1000):
    return WriteTarget("change", str(tmp_path / "change"), SCHEMA, SPEC, ("id", "day"), 4, max_rows)


def test_vectorized_hash_is_the_python_reference_for_every_length_and_nulls():
    ids = [0, 1, -7, 2**40, None, 123456789]
    names = ["", "a", "é", "x" * 31, "y" * 32, "z" * 77]
    hashed = vector_hash([pa.array(ids, pa.int64()), pa.array(names)])
    for i, (key, name) in enumerate(zip(ids, names, strict=True)):
        assert int(hashed[i]) == spark_xxhash64((key, name), (it.LongType(), it.StringType()))
    ints = vector_hash([pa.array([5, -5], pa.int32())])
    assert [int(h) for h in ints] == [spark_xxhash64((v,), (it.IntegerType(),)) for v in (5, -5)]


def test_rows_land_in_spark_folders_sorted_by_key_with_field_ids(tmp_path):
    target = _target(tmp_path, max_rows=3)
    rows = pa.table(
        {"id": [9, 1, 5, 3, 7, 2, 8], "v": list("abcdefg"), "day": ["a/b"] * 7}, schema=target.arrow_schema()
    )
    ops = pa.array(["upsert"] * 6 + ["delete"])
    files = write_table(rows, target, str(tmp_path / "w"), ops=ops, task=3)
    assert sum(f.rows for f in files) == 7
    nodes = node_ids([pa.array([9, 1, 5, 3, 7, 2, 8], pa.int64()), pa.array(["a/b"] * 7)], 4)
    for f in files:
        folder = f.path.split("/w/", 1)[1].rsplit("/", 1)[0]
        day, node, op = folder.split("/")
        assert day == "arctic_p_0=a%2Fb" and op in ("arctic_op=upsert", "arctic_op=delete")
        table = pq.read_table(f.path)
        assert table.column("id").to_pylist() == sorted(table.column("id").to_pylist())
        assert {int(node.split("=")[1])} == {
            int(nodes[[9, 1, 5, 3, 7, 2, 8].index(i)]) for i in table["id"].to_pylist()
        }
        assert [fld.metadata[b"PARQUET:field_id"] for fld in pq.read_schema(f.path)] == [b"1", b"2", b"3"]
        assert (
            os.path.basename(f.path).startswith("part-00003-")
            and f.path.endswith(".c000.snappy.parquet")
            or f.path.endswith(".c001.snappy.parquet")
        )
        assert f.rows <= 3


def test_escaping_follows_spark():
    assert escape_path_name("a b/c=d:%") == "a b%2Fc%3Dd%3A%25"


def test_newest_per_key_keeps_the_highest_sequence_and_refuses_ambiguity():
    keys = pa.table({"id": [1, 2, 1, 1]})
    assert newest_per_key(keys, pa.array([5, 1, 9, 7]), "W", "in one write").tolist() == [1, 2]
    with pytest.raises(PrimaryKeyViolationError, match=r"W writes primary key \(id=1\) 3 times in one write"):
        newest_per_key(keys, None, "W", "in one write")
    with pytest.raises(InvalidArgumentError, match="same sequence value 9"):
        newest_per_key(keys, pa.array([9, 1, 9, 7]), "W", "x")
    with pytest.raises(InvalidArgumentError, match=r"\(id=1\) has several changes and a NULL"):
        newest_per_key(keys, pa.array([None, 1, 9, 7]), "W", "x")
    with pytest.raises(PrimaryKeyViolationError, match="null primary key"):
        newest_per_key(pa.table({"id": pa.array([1, None], pa.int64())}), None, "W", "x")


def test_two_tasks_changing_one_key_keep_the_newest_after_commit_side_resolution(tmp_path):
    plan = WritePlan(
        "db.t",
        str(tmp_path),
        _target(tmp_path),
        str(tmp_path / "w"),
        CHANGES,
        "seq",
        "stream",
        "in one micro-batch",
    )
    first = pa.record_batch(
        {
            "id": [1, 2],
            "v": ["old", "two"],
            "day": ["d", "d"],
            "seq": [1, 1],
            "_change_type": ["upsert", "upsert"],
        }
    )
    second = pa.record_batch(
        {
            "id": [1, 3],
            "v": [None, "three"],
            "day": ["d", "d"],
            "seq": [2, 1],
            "_change_type": ["delete", "insert"],
        }
    )
    files = write_task(plan, [first], 0) + write_task(plan, [second], 1)
    resolved = resolve_across_files(plan, files)
    rows = {}
    for f in resolved:
        kind = "delete" if f.is_delete else "upsert"
        for r in pq.read_table(f.path).to_pylist():
            assert r["id"] not in rows
            rows[r["id"]] = (kind, r["v"])
    assert rows == {1: ("delete", None), 2: ("upsert", "two"), 3: ("upsert", "three")}
    assert sum(f.rows for f in resolved) == 3
    assert np.all([os.path.exists(f.path) for f in resolved])


def test_two_tasks_changing_one_key_of_a_partial_update_table_fold_in_task_order(tmp_path):
    from arctic_sql.table.model.merge_engine import Engine, MergeEngine

    plan = WritePlan(
        "db.t",
        str(tmp_path),
        _target(tmp_path),
        str(tmp_path / "w"),
        CHANGES,
        None,
        "write",
        "in one write",
        fold=MergeEngine(Engine.PARTIAL_UPDATE),
    )
    day = ["d", "d", "d"]
    first = pa.record_batch({"id": [1, 2, 1], "v": ["a", "two", "b"], "day": day})
    second = pa.record_batch(
        {
            "id": [1, 3, 4],
            "v": [None, "three", None],
            "day": day,
            "_change_type": ["insert", "insert", "delete"],
        }
    )
    third = pa.record_batch({"id": [4], "v": [None], "day": ["d"], "_change_type": ["delete"]})
    files = write_task(plan, [first], 0) + write_task(plan, [second], 1) + write_task(plan, [third], 2)
    resolved = resolve_across_files(plan, files)
    rows = {}
    for f in resolved:
        kind = "delete" if "arctic_op=delete" in f.path else "upsert"
        for r in pq.read_table(f.path).to_pylist():
            assert r["id"] not in rows
            rows[r["id"]] = (kind, r["v"])
    # key 1: "b" (the first task's fold) stays under the second task's NULL; key 4: one delete
    assert rows == {1: ("upsert", "b"), 2: ("upsert", "two"), 3: ("upsert", "three"), 4: ("delete", None)}
    assert sum(f.rows for f in resolved) == 4
    written = {
        os.path.join(d, n) for d, _, ns in os.walk(tmp_path / "w") for n in ns if n.endswith(".parquet")
    }
    assert written == {f.path for f in resolved}  # the files the fold replaced are gone
    again = write_task(plan, [pa.record_batch({"id": [1], "v": ["c"], "day": ["d"]})], 3)
    gone = write_task(
        plan, [pa.record_batch({"id": [1], "v": [None], "day": ["d"], "_change_type": ["delete"]})], 4
    )
    with pytest.raises(
        InvalidArgumentError, match=r"primary key \(id=1, day='d'\) more than once in one write"
    ):
        resolve_across_files(plan, gone + again)


def test_key_hashes_in_the_messages_rule_out_shared_keys_without_reading_files(tmp_path):
    from arctic_sql.table.writing.arrow_tasks import may_share_keys

    plan = WritePlan(
        "db.t", str(tmp_path), _target(tmp_path), str(tmp_path / "w"), CHANGES, None, "write", "x"
    )
    one = write_task(plan, [pa.record_batch({"id": [1, 2], "day": ["d", "d"]})], 0)
    other = write_task(plan, [pa.record_batch({"id": [3, 4], "day": ["d", "d"]})], 1)
    again = write_task(plan, [pa.record_batch({"id": [2], "day": ["d"]})], 2)
    assert all(f.key_hashes is not None for f in one + other + again)
    assert not may_share_keys(one + other)
    assert may_share_keys(one + again)
    with pytest.raises(PrimaryKeyViolationError, match=r"primary key \(id=2, day='d'\) 2 times x"):
        resolve_across_files(plan, one + other + again)


def test_rows_for_a_table_without_a_key_may_only_be_inserts():
    check_appends(pa.table({"id": [1, 2], "_CHANGE_TYPE": ["insert", "INSERT"]}), "db.t")
    check_appends(pa.table({"id": [1]}), "db.t")
    for kind, shown in (("upsert", "'upsert'"), ("delete", "'delete'"), (None, "NULL")):
        with pytest.raises(
            InvalidArgumentError, match=f"db.t has no primary key: _change_type {shown} needs one"
        ):
            check_appends(
                pa.table({"id": [1, 2], "_change_type": pa.array(["insert", kind], pa.string())}), "db.t"
            )


def test_float_columns_nested_or_not_are_written_without_bounds_and_the_rest_with(tmp_path):
    """A NaN is left out of Parquet bounds while Spark orders it above every number, so no FLOAT or
    DOUBLE leaf (top-level, in a struct, a list or a map) may carry min/max a reader could skip by."""
    rows = pa.table(
        {
            "id": [1, 2],
            "st": pa.array([{"f": 0.5, "s": "a"}, {"f": float("nan"), "s": "b"}]),
            "a": pa.array([[1.0], [float("nan")]]),
            "m": pa.array([[("k", 1.0)], []], pa.map_(pa.string(), pa.float32())),
        }
    )
    path = str(tmp_path / "f.parquet")
    pq.write_table(rows, path, write_statistics=statistics_columns(rows.schema))
    group = pq.ParquetFile(path).metadata.row_group(0)
    with_bounds = {
        group.column(i).path_in_schema: group.column(i).is_stats_set for i in range(group.num_columns)
    }
    assert with_bounds == {
        "id": True,
        "st.f": False,
        "st.s": True,
        "a.list.element": False,
        "m.key_value.key": True,
        "m.key_value.value": False,
    }
    assert (
        statistics_columns(pa.schema([("id", pa.int64()), ("st", pa.struct([("s", pa.string())]))])) is True
    )
