"""Position deletes: minor and major optimizing leave base files in place and delete superseded rows.

With a small ``self-optimizing.target-size`` every base file of these tests is past fragment size, so
a minor optimize keeps it and writes an Iceberg position-delete file for the rows the changes
supersede. The base store must stay a valid Iceberg v2 table: pyiceberg's own scan of it must equal
the model at the base's watermark after every optimize, and every reader here must apply the
deletes (merge-on-read in memory and as a Spark plan, the arctic DataFrame source, time travel).
"""

from __future__ import annotations

import os
import random

import pytest
from pyiceberg.catalog import load_catalog
from test_reference_model import Log, Model, _rows, _step, check_incremental_reads

from arctic_sql.table.maintenance import expiration, orphan_removal

pytestmark = pytest.mark.spark

ROWS = "SELECT id, p, v, s FROM db.t"
SMALL = "'self-optimizing.target-size' = '4096'"  # fragments <= 512 bytes: every file written is larger


def _create(arctic, partitioned: bool, buckets: int = 2, extra: str = "") -> None:
    key = "PRIMARY KEY (id, p)" if partitioned else "PRIMARY KEY (id)"
    arctic.sql(
        f"CREATE TABLE db.t (id BIGINT, p STRING, v BIGINT, s STRING, {key}) "
        f"{'PARTITIONED BY (p)' if partitioned else ''} "
        f"TBLPROPERTIES ('base.file-index.hash-bucket' = '{buckets}', 'change.file-index.hash-bucket' = "
        f"'{buckets}', {SMALL}{extra})"
    )


def _base_store(warehouse):
    catalog = load_catalog(
        "arctic", type="sql", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )
    return catalog.load_table(("db", "t"))


def _pyiceberg_rows(warehouse) -> list[tuple]:
    rows = _base_store(warehouse).scan(selected_fields=("id", "p", "v", "s")).to_arrow().to_pylist()
    return sorted(((r["id"], r["p"], r["v"], r["s"]) for r in rows), key=lambda r: (r[0], r[1]))


def _kinds(arctic) -> dict[str, int]:
    return {r[0]: r[1] for r in arctic.sql("SELECT kind, count(*) FROM db.t.files GROUP BY kind").collect()}


def _segments_with_deletes(arctic, rows: int, update: str) -> None:
    """db.t with ``rows`` rows optimized into base files, then ``UPDATE db.t SET {update}`` merged by a minor."""
    _create(arctic, False, buckets=1)
    arctic.sql(f"INSERT INTO db.t SELECT id, 'a', id, 'x' FROM range(0, {rows})")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')").collect()
    arctic.sql(f"UPDATE db.t SET {update}")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'minor')").collect()


@pytest.mark.parametrize(("partitioned", "seed", "in_memory_reads"), [(False, 21, True), (True, 22, False)])
def test_minor_and_major_with_position_deletes_match_the_model(
    arctic, warehouse, partitioned, seed, in_memory_reads
):
    rng = random.Random(seed)
    # in_memory_reads=False: merge-on-read runs as a Spark plan (the anti-join on file and row index).
    _create(
        arctic, partitioned, extra="" if in_memory_reads else ", 'merge-on-read.in-memory-max-bytes' = '0'"
    )
    model = Model(partitioned)
    states: dict[int, list[tuple]] = {}
    log, previous, deletes_seen = Log(), 0, 0
    for step in range(18):
        arctic.sql(_step(rng, model))
        version = arctic.sql("SELECT coalesce(max(version), 0) FROM db.t.history").collect()[0][0]
        states[version] = model.sorted()
        if version > previous:
            log.record(version, model)
            previous = version
        if step % 3 == 2:
            mode = "major" if step % 9 == 8 else "minor"
            result = arctic.sql(f"CALL system.optimize(table => 'db.t', mode => '{mode}')").collect()
            assert all(r["committed"] for r in result), result
            deletes_seen = max(deletes_seen, _kinds(arctic).get("position-delete", 0))
            assert _rows(arctic, ROWS) == model.sorted(), f"after {mode} at step {step}"
            # Every change is merged, so the base store alone is the latest version, for any Iceberg reader.
            assert _pyiceberg_rows(warehouse) == model.sorted(), f"pyiceberg after {mode} at step {step}"
            df = arctic.spark.read.format("arctic").load("db.t").select("id", "p", "v", "s")
            assert sorted((tuple(r) for r in df.collect()), key=lambda r: (r[0], r[1])) == model.sorted()
    assert deletes_seen, "no minor optimize wrote a position-delete file"
    for version, expected in states.items():
        assert _rows(arctic, f"{ROWS} VERSION AS OF {version}") == expected, version
    check_incremental_reads(arctic, rng, model, states, log)
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')").collect()
    assert "position-delete" not in _kinds(arctic), "full left position deletes behind"
    assert _rows(arctic, ROWS) == model.sorted() == _pyiceberg_rows(warehouse)


def test_a_minor_rewrites_only_the_changed_rows(arctic, warehouse):
    _create(arctic, False, buckets=1)
    arctic.sql("INSERT INTO db.t SELECT id, 'a', id, 'x' FROM range(0, 2000)")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')").collect()
    before = {r["path"] for r in arctic.sql("SELECT path FROM db.t.files WHERE kind = 'base'").collect()}
    arctic.sql("UPDATE db.t SET v = -v WHERE id % 100 = 0")
    arctic.sql("DELETE FROM db.t WHERE id % 100 = 1")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'minor')").collect()
    files = arctic.sql(
        "SELECT kind, path, rows, sequence_number FROM db.t.files WHERE store = 'base'"
    ).collect()
    base = {r["path"]: r["rows"] for r in files if r["kind"] == "base"}
    # A delete file applies to data files of lower sequence numbers (Iceberg's rule): those the full wrote.
    full = max(r["sequence_number"] for r in files if r["path"] in before)
    assert all(r["sequence_number"] > full for r in files if r["kind"] == "position-delete")
    # The old base files all stay; one new file holds the 20 updated rows; the deletes name 40 old rows.
    assert before < set(base) and sum(base[p] for p in set(base) - before) == 20
    assert sum(r["rows"] for r in files if r["kind"] == "position-delete") == 40
    expected = [(i, "a", -i if i % 100 == 0 else i, "x") for i in range(2000) if i % 100 != 1]
    assert _rows(arctic, ROWS) == expected == _pyiceberg_rows(warehouse)
    # A second minor on the same rows adds to the same file's deletes: still one delete file per data file.
    arctic.sql("UPDATE db.t SET s = 'y' WHERE id % 100 = 2")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'minor')").collect()
    files = arctic.sql("SELECT kind, path, rows FROM db.t.files WHERE store = 'base'").collect()
    deletes = [r for r in files if r["kind"] == "position-delete"]
    assert sum(r["rows"] for r in deletes) == 60
    named = [
        next(
            b
            for b in _base_store(warehouse).scan().plan_files()
            if d["path"] in {x.file_path for x in b.delete_files}
        ).file.file_path
        for d in deletes
    ]
    assert len(named) == len(set(named)), "a data file with two delete files"
    expected = [(i, "a", v, "y" if i % 100 == 2 else s) for i, _, v, s in expected]
    assert _rows(arctic, ROWS) == expected == _pyiceberg_rows(warehouse)


def test_position_deletes_survive_schema_evolution(arctic, warehouse):
    _segments_with_deletes(arctic, 500, "v = 0 WHERE id < 10")
    assert _kinds(arctic).get("position-delete")
    arctic.sql("ALTER TABLE db.t RENAME COLUMN s TO label")
    arctic.sql("ALTER TABLE db.t ADD COLUMN w DOUBLE")
    arctic.sql("UPDATE db.t SET w = 1.5, label = 'z' WHERE id BETWEEN 5 AND 14")
    expected = [
        (i, "a", 0 if i < 10 else i, "z" if 5 <= i <= 14 else "x", 1.5 if 5 <= i <= 14 else None)
        for i in range(500)
    ]
    query = "SELECT id, p, v, label, w FROM db.t"
    assert _rows(arctic, query) == expected
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'minor')").collect()
    assert _rows(arctic, query) == expected
    rows = _base_store(warehouse).scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["p"], r["v"], r["label"], r["w"]) for r in rows) == expected
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')").collect()
    assert _rows(arctic, query) == expected and "position-delete" not in _kinds(arctic)


def test_expiration_and_orphan_removal_keep_the_delete_files_a_version_needs(arctic, warehouse):
    _segments_with_deletes(arctic, 1000, "v = -1 WHERE id < 5")
    first = {
        r["path"] for r in arctic.sql("SELECT path FROM db.t.files WHERE kind = 'position-delete'").collect()
    }
    arctic.sql("UPDATE db.t SET v = -2 WHERE id BETWEEN 5 AND 9")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'minor')").collect()
    second = {
        r["path"] for r in arctic.sql("SELECT path FROM db.t.files WHERE kind = 'position-delete'").collect()
    }
    assert first and second and not first & second  # the second minor replaced the delete file
    expected = [(i, "a", -1 if i < 5 else -2 if i < 10 else i, "x") for i in range(1000)]
    local = [p.removeprefix("file://") for p in first | second]
    assert all(os.path.exists(p) for p in local)
    expiration.expire_snapshots(arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1, retain_last=1)
    orphan_removal.remove_orphan_files(
        arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1, force=True
    )
    # The replaced delete file went with the versions that needed it; the live one stays.
    assert not any(os.path.exists(p.removeprefix("file://")) for p in first)
    assert all(os.path.exists(p.removeprefix("file://")) for p in second)
    assert _rows(arctic, ROWS) == expected == _pyiceberg_rows(warehouse)
