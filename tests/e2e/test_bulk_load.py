"""Bulk loads (INSERT OVERWRITE, CREATE TABLE AS SELECT) through the one-job base writer (table/writing/bulk_base_files.py):
the rows land as given, a bad key refuses the whole load, and the files are node-aligned and sorted."""

from __future__ import annotations

import os

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from arctic_sql.errors import ArcticError, PrimaryKeyViolationError
from arctic_sql.table.files import storage
from arctic_sql.table.format.keyhash_arrow import node_ids

pytestmark = pytest.mark.spark

ROWS = 6000


def _rows(arctic, sql):
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


def _source(arctic, name: str, rows: int = ROWS, partitions: int = 3) -> list[tuple]:
    """A temp view of ``rows`` rows over ``partitions`` input partitions, keys in no particular order;
    returns its rows."""
    arctic.spark.range(0, rows, 1, partitions).selectExpr(
        "(id * 7919) % 10007 AS id",
        "concat('v', id) AS v",
        "element_at(array('eu', 'us', 'apac'), cast(id % 3 + 1 AS INT)) AS region",
    ).createOrReplaceTempView(name)
    return _rows(arctic, f"SELECT * FROM {name}")


def _base_files(arctic, table: str) -> list[dict]:
    return [r.asDict() for r in arctic.sql(f"SELECT * FROM {table}.files").collect() if r["store"] == "base"]


def _parquet_on_disk(warehouse: str) -> set[str]:
    found = set()
    for folder, _, names in os.walk(warehouse):
        found.update(os.path.join(folder, n) for n in names if n.endswith(".parquet") and "/data/" in folder)
    return found


def _assert_node_aligned_and_sorted(arctic, table: str, keys: list[str], buckets: int) -> int:
    """Every base file holds only keys of its node, strictly ascending; returns the number of files."""
    files = _base_files(arctic, table)
    for f in files:
        rows = pq.read_table(storage.filesystem(f["path"])[1])
        assert rows.num_rows == f["rows"] > 0
        assert f"/arctic_node={f['node']}/" in f["path"]
        nodes = node_ids([rows.column(k).combine_chunks() for k in keys], buckets)
        assert set(nodes.tolist()) == {f["node"]}, f["path"]
        ordered = rows.select(keys).take(pc.sort_indices(rows.select(keys), [(k, "ascending") for k in keys]))
        assert ordered.equals(rows.select(keys)), f"{f['path']} is not sorted by its key"
        assert len(set(zip(*[rows.column(k).to_pylist() for k in keys], strict=True))) == rows.num_rows
    return len(files)


def _create_and_load(arctic, table: str, clauses: str) -> list[tuple]:
    """CREATE ``table`` (id, v, region), INSERT OVERWRITE it from a fresh source, check it holds
    the source's rows; return them."""
    arctic.sql(f"CREATE TABLE {table} (id BIGINT, v STRING, region STRING, {clauses}")
    expected = _source(arctic, "src")
    arctic.sql(f"INSERT OVERWRITE {table} SELECT * FROM src")
    assert _rows(arctic, f"SELECT * FROM {table}") == expected
    return expected


def test_insert_overwrite_loads_the_rows_as_given_in_sorted_node_files(arctic):
    expected = _create_and_load(
        arctic, "db.t", "PRIMARY KEY (id)) TBLPROPERTIES ('base.file-index.hash-bucket' = '8')"
    )
    assert _assert_node_aligned_and_sorted(arctic, "db.t", ["id"], 8) == 8  # one file per node
    # a second load replaces the first
    arctic.sql("INSERT OVERWRITE db.t SELECT id, 'again', region FROM src WHERE id < 100")
    assert _rows(arctic, "SELECT * FROM db.t") == [(r[0], "again", r[2]) for r in expected if r[0] < 100]


def test_duplicate_key_across_input_partitions_refuses_the_load(arctic, warehouse):
    before = _create_and_load(arctic, "db.t", "PRIMARY KEY (id))")
    history = _rows(arctic, "SELECT version FROM db.t.history")
    files = _parquet_on_disk(warehouse)
    # the duplicate of key 5 comes from another input partition than key 5 itself
    arctic.spark.range(0, 4000, 1, 2).selectExpr("id", "'x' AS v", "'eu' AS region").unionByName(
        arctic.spark.range(5, 6, 1, 1).selectExpr("id", "'y' AS v", "'us' AS region")
    ).createOrReplaceTempView("dup")
    assert arctic.spark.table("dup").rdd.getNumPartitions() == 3
    with pytest.raises(PrimaryKeyViolationError) as error:
        arctic.sql("INSERT OVERWRITE db.t SELECT * FROM dup")
    assert str(error.value) == "OVERWRITE into db.t writes primary key (id=5) 2 times in one statement"
    assert _rows(arctic, "SELECT * FROM db.t") == before
    assert _rows(arctic, "SELECT version FROM db.t.history") == history
    assert _parquet_on_disk(warehouse) == files  # the refused load's files are gone


def test_null_key_refuses_the_load(arctic):
    arctic.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
    arctic.sql("INSERT OVERWRITE db.t VALUES (1, 'a')")
    arctic.spark.range(0, 100, 1, 2).selectExpr(
        "IF(id = 42, NULL, id) AS id", "'x' AS v"
    ).createOrReplaceTempView("nulls")
    with pytest.raises(ArcticError, match="null primary key") as error:
        arctic.sql("INSERT OVERWRITE db.t SELECT * FROM nulls")
    assert "\n" not in str(error.value)
    assert _rows(arctic, "SELECT * FROM db.t") == [(1, "a")]


def test_partitioned_overwrite_replaces_the_partitions_it_writes(arctic):
    expected = _create_and_load(arctic, "db.p", "PRIMARY KEY (id, region)) PARTITIONED BY (region)")
    files = _base_files(arctic, "db.p")
    assert {f["partition"] for f in files} == {"region=eu", "region=us", "region=apac"}
    assert all(f"/arctic_p_0={f['partition'].split('=')[1]}/" in f["path"] for f in files)
    assert _assert_node_aligned_and_sorted(arctic, "db.p", ["id", "region"], 4) == 12
    # only the partition written is replaced
    arctic.sql("INSERT OVERWRITE db.p SELECT id, 'new', region FROM src WHERE region = 'eu' AND id < 50")
    now = [r for r in expected if r[2] != "eu"] + [
        (r[0], "new", "eu") for r in expected if r[2] == "eu" and r[0] < 50
    ]
    assert _rows(arctic, "SELECT * FROM db.p") == sorted(now)


def test_ctas_loads_the_rows_and_a_duplicate_leaves_no_table(arctic):
    expected = _source(arctic, "src")
    arctic.sql("CREATE TABLE db.c PRIMARY KEY (id) USING arctic AS SELECT * FROM src")
    assert _rows(arctic, "SELECT * FROM db.c") == expected
    assert _assert_node_aligned_and_sorted(arctic, "db.c", ["id"], 4) == 4
    key = expected[-1][0]
    with pytest.raises(PrimaryKeyViolationError, match=rf"primary key \(id={key}\) 2 times"):
        arctic.sql(
            f"CREATE TABLE db.d PRIMARY KEY (id) USING arctic AS "
            f"SELECT * FROM src UNION ALL SELECT {key}, 'again', 'eu'"
        )
    assert [r[1] for r in arctic.sql("SHOW TABLES IN db").collect() if not r[2]] == ["c"]


def test_merge_on_read_and_optimize_after_a_bulk_load_give_the_model(arctic):
    model = {r[0]: r for r in _create_and_load(arctic, "db.t", "PRIMARY KEY (id))")}
    arctic.sql("INSERT INTO db.t VALUES (1, 'upd', 'eu'), (20000, 'new', 'us')")
    arctic.sql("DELETE FROM db.t WHERE id < 1000 AND id % 2 = 0")
    model[1], model[20000] = (1, "upd", "eu"), (20000, "new", "us")
    model = {k: r for k, r in model.items() if not (k < 1000 and k % 2 == 0)}
    assert _rows(arctic, "SELECT * FROM db.t") == sorted(model.values())  # merge-on-read
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'minor')")
    assert _rows(arctic, "SELECT * FROM db.t") == sorted(model.values())
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    assert _rows(arctic, "SELECT * FROM db.t") == sorted(model.values())
    assert _assert_node_aligned_and_sorted(arctic, "db.t", ["id"], 4) >= 4


def test_overwrite_of_a_table_without_a_key(arctic):
    arctic.sql("CREATE TABLE db.a (id BIGINT, v STRING, region STRING)")
    expected = _source(arctic, "src")
    arctic.sql(
        "INSERT OVERWRITE db.a SELECT * FROM src UNION ALL SELECT * FROM src"
    )  # no key: duplicates stay
    assert _rows(arctic, "SELECT * FROM db.a") == sorted(expected + expected)
    assert sum(f["rows"] for f in _base_files(arctic, "db.a")) == 2 * len(expected)
