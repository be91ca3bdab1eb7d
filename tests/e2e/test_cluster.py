"""arctic-sql deployed as in production, on this machine: table files on an S3-compatible server (moto's
server mode), the catalog in PostgreSQL (pyiceberg's SQL catalog over psycopg2), a Spark standalone
cluster of a master and two workers (cluster_harness.py), the optimizer service in its own process,
and two drivers writing the same table through the same catalog.

Each driver runs in a subprocess (one SparkContext per JVM; this process has the suite's local
session) with ``master="spark://..."``: a seeded reference-model run of upserts, deletes and merges
with minor, major and full optimizes over its own partitions, checked against a Python model after
every step, with time travel and ``VERSION BETWEEN`` (cluster_workload.py). No process has an AWS_*
variable: the store is reached through the catalog's properties alone, shipped in arctic's task plans.
This process, a third client of the catalog, then checks that the table holds both drivers' commits,
expires snapshots, removes an orphan from the bucket, and drops the table with PURGE; nothing of the
table was ever written to a local disk. The work ran on the cluster: each driver's one executor ran on
a worker of its own and logged finished tasks there. On the same topology, the streaming sink: a driver
on the cluster SIGKILLed mid-stream and a second one on its checkpoint commit every batch once.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pg_harness
import pytest
from cluster_harness import StandaloneCluster, executor_logs, finish_driver, start_driver
from host_load import scaled
from s3_harness import SECRET, moto_s3, objects, storage_properties

import arctic_sql
from arctic_sql.table.format import versions
from arctic_sql.table.records import optimizing_processes as state

pytestmark = pytest.mark.spark

WORKLOAD = Path(__file__).with_name("cluster_workload.py")
STREAM_DRIVER = Path(__file__).with_name("stream_sink_driver.py")
FINISHED_TASK = re.compile(r"Finished task \S+ in stage")
BUCKET, WAREHOUSE = "lake", "s3://lake/wh"
# name: its partitions, its seed, its length. One executor each: the cluster's two cores, one a worker.
DRIVERS = {"a": ("a,b", 12, []), "b": ("c,d", 13, ["--short"])}
# What a table's files look like: data, deletes, manifests, metadata, arctic's records.
TABLE_FILE = re.compile(r"\.(parquet|avro|metadata\.json)$|/(writes|optimizing|consumers)/")
DRIVER_ENV = {"ARCTIC_DRIVER_MEMORY": "768m", "SPARK_LOCAL_IP": "127.0.0.1"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # A core a worker: each driver's one executor (spark.cores.max=1) runs on a worker of its own.
    with StandaloneCluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1, memory="768m") as running:
        yield running


@pytest.fixture(scope="module")
def postgres():
    reason = pg_harness.missing()
    if reason:
        pytest.skip(reason)
    with pg_harness.PostgresServer() as server:
        server.create_database("catalog")
        yield server


@pytest.fixture(scope="module")
def s3():
    with moto_s3(BUCKET) as server:
        yield server


@pytest.fixture
def catalog(postgres, s3, tmp_path):
    """The deployment's catalog properties, and the same in a pyiceberg YAML file only its owner reads
    (``--catalog-config``: credentials stay off the command lines, which ``ps`` shows to anyone)."""
    endpoint, _ = s3
    properties = {
        "type": "sql",
        "uri": postgres.uri("catalog"),
        "warehouse": WAREHOUSE,
        **storage_properties(endpoint),
    }
    path = tmp_path / "catalog.yaml"
    path.touch(mode=0o600)
    path.write_text(
        "catalog:\n  arctic:\n" + "".join(f"    {k}: {json.dumps(v)}\n" for k, v in properties.items())
    )
    return properties, path


def _optimizer(catalog_file: Path, log: Path) -> subprocess.Popen:
    """``arctic-sql optimizer`` on local Spark, in its own process, with the shared catalog."""
    command = [
        sys.executable,
        "-m",
        "arctic_sql.frontends.cli",
        "optimizer",
        "--warehouse",
        WAREHOUSE,
        "--catalog-config",
        str(catalog_file),
        "--master",
        "local[1]",
        "--interval",
        "0.5",
    ]
    return start_driver(command, log, env=DRIVER_ENV, cwd=log.parent)


def _local_table_files(*roots: Path) -> list[str]:
    return [
        str(p) for root in roots for p in root.rglob("*") if p.is_file() and TABLE_FILE.search(p.as_posix())
    ]


def _local_copies(names: set[str], root: str) -> list[str]:
    """Files under ``root`` named as one of ``names`` (the bucket's files: uuids, unique): a spill or
    staging copy of a table file anywhere in the machine's temporary folder."""
    return [os.path.join(folder, n) for folder, _, files in os.walk(root) for n in files if n in names]


def test_two_drivers_and_the_optimizer_share_a_table_on_s3_with_a_postgresql_catalog(
    cluster, catalog, s3, spark, tmp_path, restore_storage
):
    started = time.monotonic()
    properties, catalog_file = catalog
    _, client = s3
    this = arctic_sql.connect(warehouse=WAREHOUSE, spark=spark, catalog_properties=properties)
    this.sql("CREATE DATABASE db")
    this.sql("""CREATE TABLE db.t (id BIGINT, p STRING, v INT, PRIMARY KEY (id, p)) PARTITIONED BY (p)
                TBLPROPERTIES ('base.file-index.hash-bucket' = '2', 'change.file-index.hash-bucket' = '2',
                               'self-optimizing.minor.trigger.file-count' = '3')""")

    folders = {name: tmp_path / name for name in [*DRIVERS, "optimizer"]}
    for folder in folders.values():
        folder.mkdir()
    service = _optimizer(catalog_file, folders["optimizer"] / "log")
    drivers = {}
    try:
        for name, (parts, seed, length) in DRIVERS.items():
            command = [
                sys.executable,
                str(WORKLOAD),
                cluster.master_url,
                WAREHOUSE,
                str(seed),
                "--catalog",
                str(catalog_file),
                "--parts",
                parts,
                "--cores",
                "1",
                *length,
            ]
            drivers[name] = start_driver(command, folders[name] / "log", env=DRIVER_ENV, cwd=folders[name])
        results = {
            name: finish_driver(process, folders[name] / "log", timeout_s=600)
            for name, process in drivers.items()
        }
    finally:
        service.send_signal(signal.SIGTERM)
        service_log = finish_driver(service, folders["optimizer"] / "log", timeout_s=120).stderr
    summaries = {}
    for name, result in results.items():
        print(f"driver {name}:\n{result.stdout}")  # each step with its time, shown when the test fails
        assert result.returncode == 0, f"driver {name}: {result.stderr[-3000:]}"
        summaries[name] = json.loads(result.stdout.strip().splitlines()[-1])
    assert service.returncode == 0 and "optimizer stopped" in service_log, service_log[-3000:]
    assert SECRET not in service_log + "".join(r.stdout + r.stderr for r in results.values())

    for summary in summaries.values():
        assert summary["master"] == cluster.master_url
        assert len(summary["block_managers"]) == 2, summary  # the driver and its executor
        assert summary["executor_aws_variables"] == [], summary
        assert summary["rows"], summary
    # The drivers' optimizes and the service's: each drivers' partitions were optimized by someone.
    table = this.table("db.t")
    records = state.processes(table)
    assert sum(r.status == state.SUCCESS and r.trigger == "service" for r in records) >= 1, service_log[
        -3000:
    ]
    assert sum(s["optimizes_committed"] for s in summaries.values()) >= 1, summaries

    # Both drivers' commits are in the table: every data commit each made is a version, and their rows.
    history = this.sql("SELECT version FROM db.t.history").collect()
    assert len(history) == sum(len(s["versions"]) for s in summaries.values()), (history, summaries)
    expected = sorted(tuple(row) for s in summaries.values() for row in s["rows"])
    assert _sorted(this, "SELECT id, p, v FROM db.t") == expected

    # Maintenance over the shared catalog, from a third process: expire all but the last version, and
    # remove an orphan (a crashed writer's file) from the bucket; the rows stay.
    latest = max(r["version"] for r in history)
    this.sql(
        "CALL system.expire_snapshots(table => 'db.t', older_than => current_timestamp(), retain_last => 1)"
    )
    orphan = f"{table.base.location()}/data/{'ab' * 16}/part-0.parquet"  # s3://lake/wh/db/t/base/...
    client.put_object(Bucket=BUCKET, Key=orphan.removeprefix(f"s3://{BUCKET}/"), Body=b"not a table file")
    table = this.table("db.t")
    tracked = {store.metadata_location for store in (table.base, table.change)} | {
        entry.metadata_file for store in (table.base, table.change) for entry in store.metadata.metadata_log
    }
    removed = this.sql(
        "CALL system.remove_orphan_files(table => 'db.t', force => true, older_than => "
        "timestamp_millis(unix_millis(current_timestamp()) + 1000))"
    ).collect()
    # Besides the planted file, only the metadata files of commits that lost a race to another process
    # may go: pyiceberg's SQL catalog writes one before its compare-and-swap and leaves it when it loses.
    lost = [r[0] for r in removed if r[0] != orphan]
    assert orphan in [r[0] for r in removed], removed
    assert all(f.endswith(".metadata.json") and f not in tracked for f in lost), (lost, sorted(tracked))
    assert orphan.removeprefix(f"s3://{BUCKET}/") not in objects(client, "wh/", BUCKET)
    assert _sorted(this, "SELECT id, p, v FROM db.t") == expected
    assert _sorted(this, f"SELECT id, p, v FROM db.t VERSION AS OF {latest}") == expected

    # Nothing of the table was written to a local disk: not by the drivers, the optimizer, the
    # executors (their working folders are the workers'), nor this process.
    stored = objects(client, "wh/db/t/", BUCKET)
    assert any(k.endswith(".parquet") for k in stored) and any(k.endswith(".metadata.json") for k in stored)
    assert _local_table_files(tmp_path, cluster.root) == []
    assert (
        _local_copies(
            {os.path.basename(k) for k in stored if len(os.path.basename(k)) > 20}, tempfile.gettempdir()
        )
        == []
    )

    this.sql("DROP TABLE db.t PURGE")
    assert objects(client, "wh/db/t/", BUCKET) == []
    assert [
        r for r in this.sql("SHOW TABLES IN db").collect() if not r.isTemporary
    ] == []  # other tests' views

    # Each driver's executor ran on a worker of its own and finished tasks there.
    ran = {}
    for name, summary in summaries.items():
        for work_dir in cluster.worker_dirs:
            for log in executor_logs(work_dir, summary["app_id"]):
                if FINISHED_TASK.search(log.read_text(errors="replace")):
                    ran.setdefault(name, set()).add(work_dir.name)
    assert sorted(len(workers) for workers in ran.values()) == [1, 1], ran
    assert set.union(*ran.values()) == {w.name for w in cluster.worker_dirs}, ran
    print(f"deployment run: {time.monotonic() - started:.1f} s")


def _change_files(batches: list[list[tuple]], folder: Path) -> dict[int, tuple]:
    """One JSON-lines file of changes (id, v, seq, kind) per batch, in batch order (modification
    times: the file source's order); returns the rows the table must end with."""
    folder.mkdir()
    model: dict[int, tuple] = {}
    for number, rows in enumerate(batches):
        path = folder / f"b{number:04d}.json"
        path.write_text("\n".join(json.dumps(dict(zip(("id", "v", "seq", "_change_type"), r))) for r in rows))
        os.utime(path, (1_700_000_000 + number, 1_700_000_000 + number))
        for key, v, seq, kind in rows:  # one change per key per batch
            if kind == "delete":
                model.pop(key, None)
            else:
                model[key] = (v, seq)
    return model


def test_a_stream_into_a_table_on_s3_survives_its_killed_driver_each_batch_once(
    cluster, catalog, s3, spark, tmp_path, restore_storage
):
    """The exactly-once sink, deployed: a driver on the cluster streams change files into a table on
    S3 behind the PostgreSQL catalog, is SIGKILLed mid-stream, and a new driver on the same
    checkpoint finishes: every batch committed once, the table equal to the changes applied in order,
    nothing of the table on a local disk."""
    properties, catalog_file = catalog
    _, client = s3
    rng = random.Random(27)
    batches = []
    for b in range(8):
        ids = rng.sample(range(30), 10)
        batches.append([(i, f"v{b}-{i}", b, "delete" if n % 4 == 3 else "upsert") for n, i in enumerate(ids)])
    model = _change_files(batches, tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"  # Spark's own files: on the driver's disk (s3a:// needs hadoop-aws)
    this = arctic_sql.connect(warehouse=WAREHOUSE, spark=spark, catalog_properties=properties)
    this.sql("CREATE DATABASE IF NOT EXISTS db")
    this.sql("CREATE TABLE db.s (id BIGINT, v STRING, seq BIGINT, PRIMARY KEY (id))")

    def driver(name: str, *extra: str) -> subprocess.Popen:
        (tmp_path / name).mkdir()
        command = [sys.executable, str(STREAM_DRIVER), WAREHOUSE, str(tmp_path / "in"), str(checkpoint)]
        command += ["--catalog", str(catalog_file), "--master", cluster.master_url, "--table", "db.s", *extra]
        return start_driver(command, tmp_path / name / "log", env=DRIVER_ENV, cwd=tmp_path / name)

    def committed() -> list[int]:
        store = this.table("db.s").change
        summaries = [versions.summary_of(s) for s in versions.snapshots_in_order(store)]
        return [int(s[versions.STREAM_BATCH_ID]) for s in summaries if versions.STREAM_BATCH_ID in s]

    killed = driver("killed", "--forever")
    try:
        deadline = time.monotonic() + scaled(300)
        while len(committed()) < 3 and killed.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)  # polling for the third commit, not timing anything
        assert killed.poll() is None, Path(f"{tmp_path}/killed/log.err").read_text()[-3000:]
        assert len(committed()) >= 3, "the stream committed fewer than 3 batches in time"
    finally:
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait(timeout=60)
    result = finish_driver(driver("finished"), tmp_path / "finished" / "log", timeout_s=scaled(400))
    assert result.returncode == 0 and "DONE" in result.stdout, result.stderr[-3000:]
    assert SECRET not in result.stdout + result.stderr

    logged = sorted(int(n.name) for n in (checkpoint / "commits").iterdir() if n.name.isdigit())
    assert committed() == logged == list(range(len(logged)))  # each batch once, in order
    assert {r[0]: (r[1], r[2]) for r in this.sql("SELECT id, v, seq FROM db.s").collect()} == model
    stored = objects(client, "wh/db/s/", BUCKET)
    assert any(k.endswith(".parquet") for k in stored)
    assert _local_table_files(tmp_path, cluster.root) == []
    this.sql("DROP TABLE db.s PURGE")
    assert objects(client, "wh/db/s/", BUCKET) == []


def _sorted(session, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in session.sql(sql).collect())
