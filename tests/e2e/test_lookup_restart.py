"""streaming.lookup_join across a killed driver: a driver process (lookup_restart_driver.py) joins fact
files with a dimension that changes between batches and streams the result into a primary-key table
through the exactly-once arctic sink; it is SIGKILLed at a seeded random moment while a batch is
planned, the dimension changes again while it is down, and a new driver goes on from the checkpoint.
The table must then equal a plain-Python reference: every fact joined with the dimension version its
micro-batch was planned at: the newest version committed before the batch's timestamp, as the
checkpoint's offsets log records it."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from host_load import scaled

from arctic_sql.table.format import versions

pytestmark = pytest.mark.spark

DRIVER = os.path.join(os.path.dirname(__file__), "lookup_restart_driver.py")
KEYS = 40  # the dimension's key space; facts pick keys from it, so some miss (how="left": nulls)
STEPS, FACTS, KILLED_STEP = 3, 12, 1  # fact files, facts per file, the file whose batch is killed
SEED = 14


def _driver(warehouse, facts, checkpoint, cache, log):
    environment = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    with open(log, "a") as out:
        return subprocess.Popen(
            [sys.executable, DRIVER, warehouse, facts, checkpoint, cache],
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _planned(checkpoint):
    """Per planned micro-batch: (its timestamp in ms, the file source's end offset), from Spark's
    offsets log (a header line, the batch's metadata with ``batchTimestampMs``, then one line per
    source: the file source's ``{"logOffset": n}``)."""
    folder, planned = os.path.join(checkpoint, "offsets"), {}
    for name in os.listdir(folder) if os.path.isdir(folder) else ():
        if name.isdigit():
            with open(os.path.join(folder, name)) as f:
                lines = [json.loads(line) for line in f.read().splitlines()[1:] if line.startswith("{")]
            stamp = next(line["batchTimestampMs"] for line in lines if "batchTimestampMs" in line)
            files = next((line["logOffset"] for line in lines if "logOffset" in line), -1)
            planned[int(name)] = (stamp, files)
    return planned


def _file_offsets(checkpoint):
    """The file source's log: each fact file's name -> the source offset that admitted it."""
    offsets = {}
    root = os.path.join(checkpoint, "sources")
    for source in os.listdir(root) if os.path.isdir(root) else ():
        for name in os.listdir(os.path.join(root, source)):
            if name.startswith("."):
                continue
            with open(os.path.join(root, source, name)) as f:
                for line in f.read().splitlines():
                    if line.startswith("{") and "path" in line:
                        entry = json.loads(line)
                        offsets[os.path.basename(entry["path"])] = entry["batchId"]
    return offsets


def _batches_of_files(checkpoint, committed_only=True):
    """Each fact file's micro-batch and the timestamp that batch was planned at."""
    planned = _planned(checkpoint)
    commits = os.path.join(checkpoint, "commits")
    done = {int(n) for n in os.listdir(commits) if n.isdigit()} if os.path.isdir(commits) else set()
    found = {}
    for name, offset in _file_offsets(checkpoint).items():
        batch = min((b for b, (_, files) in planned.items() if files >= offset), default=None)
        if batch is not None and (batch in done or not committed_only):
            found[name] = (batch, planned[batch][0])
    return found


def _wait(condition, process, log, what, timeout=240):
    deadline = time.monotonic() + scaled(timeout)
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            with open(log) as f:
                tail = f.read()[-3000:]
            pytest.fail(f"the driver exited ({process.returncode}) or timed out waiting for {what}:\n{tail}")
        time.sleep(0.1)  # polling the checkpoint, not timing anything


def test_a_killed_driver_restarted_from_the_checkpoint_joins_each_fact_with_its_batch_version(
    arctic, warehouse, tmp_path
):
    """How this can fail: a replayed batch that joined a newer dimension than its planned version
    (the dimension changes every key's name while the driver is down, so such a fact gets another
    name and another ``v``), a fact lost or joined twice (a missing fid; a fid twice in one batch
    stops the driver, as the sink refuses a key twice in a micro-batch; a batch committed twice shows
    twice in the sink's commits, and the change store would hold more rows than facts), or a
    batch that met a stale or half-applied dimension (its rows differ from the model at the version
    in its offsets)."""
    rng = random.Random(SEED)
    facts, checkpoint, cache, log = (str(tmp_path / n) for n in ("facts", "ck", "cache", "driver.log"))
    os.makedirs(facts)
    arctic.sql("CREATE TABLE db.dim (id BIGINT, name STRING, tier INT, PRIMARY KEY (id)) USING arctic")
    arctic.sql(
        "CREATE TABLE db.out (fid BIGINT, id BIGINT, name STRING, tier INT, v BIGINT, PRIMARY KEY (fid)) "
        "USING arctic"
    )
    model: dict[int, tuple[str, int]] = {}
    at_version: dict[int, dict] = {}  # dimension version -> the model's rows then

    def commit(upserts, deletes=()):
        """One dimension version: upserts (updates and inserts) and deletes in one commit."""
        model.update({k: (n, t) for k, n, t in upserts})
        for k in deletes:
            del model[k]
        rows = [(k, n, t, "upsert") for k, n, t in upserts] + [(k, None, None, "delete") for k in deletes]
        (
            arctic.spark.createDataFrame(rows, "id BIGINT, name STRING, tier INT, _change_type STRING")
            .write.format("arctic")
            .mode("append")
            .save("db.dim")
        )
        dim = arctic.table("db.dim")
        at_version[versions.history(dim.base, dim.change).latest] = dict(model)

    def change(step):
        present, absent = sorted(model), sorted(set(range(KEYS)) - set(model))
        updated = rng.sample(present, 3)
        commit(
            [(k, f"s{step}-{k}", step) for k in updated + rng.sample(absent, min(2, len(absent)))],
            rng.sample(sorted(set(present) - set(updated)), 2),
        )

    def step(number):
        """A fact file and a dimension change that come together: usually one micro-batch takes both
        (else the change comes a batch earlier); either way the offsets log says what each batch met."""
        ids = [rng.randrange(KEYS) for _ in range(FACTS)]
        table = pa.table(
            {
                "fid": pa.array(range(number * 100, number * 100 + FACTS), pa.int64()),
                "id": pa.array(ids, pa.int64()),
            }
        )
        name = f"f{number:03d}.parquet"
        pq.write_table(table, os.path.join(facts, name + ".tmp"))
        change(number)
        os.rename(os.path.join(facts, name + ".tmp"), os.path.join(facts, name))  # never half a file
        landed[name] = ids
        return name

    landed: dict[str, list[int]] = {}
    commit([(k, f"init-{k}", 0) for k in range(0, KEYS, 2)])
    step(0)  # the first batch loads the dimension and joins these facts
    kill_delay = rng.uniform(0.0, 1.5)
    process = _driver(warehouse, facts, checkpoint, cache, log)
    killed = []
    try:
        for number in range(STEPS):
            name = "f000.parquet" if number == 0 else step(number)
            # The next change waits until this file's batch is planned, so the dimension moves between
            # batches. The kill comes while the kill step's batch runs: at a seeded random moment after it
            # was planned (its offsets logged); it may or may not have committed by then.
            _wait(
                lambda name=name: name in _batches_of_files(checkpoint, committed_only=False),
                process,
                log,
                f"the plan of {name}",
            )
            if number != KILLED_STEP:
                continue
            time.sleep(kill_delay)  # the random kill moment, not a timing assumption
            killed.append(name in _batches_of_files(checkpoint))
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
            commit([(k, f"down-{k}", 99) for k in sorted(model)])  # every row changes while no driver runs
            process = _driver(warehouse, facts, checkpoint, cache, log)
        _wait(lambda: set(landed) <= set(_batches_of_files(checkpoint)), process, log, "every fact file")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
    assert killed, "the driver was never killed"

    dim = arctic.table("db.dim")
    commits = versions.history(dim.base, dim.change).commits

    def version_at(stamp):
        """The dimension version newest when a batch was planned (committed at or before it)."""
        return max(c.version for c in commits if c.committed_at_ms <= stamp)

    met = {name: (batch, version_at(stamp)) for name, (batch, stamp) in _batches_of_files(checkpoint).items()}
    expected = {}
    for name, ids in landed.items():
        version = met[name][1]
        assert version in at_version, f"{name} met version {version}, never committed ({sorted(at_version)})"
        step = int(name[1:4])
        for n, key in enumerate(ids):
            expected[step * 100 + n] = (key, *at_version[version].get(key, (None, None)), version)
    rows = {r.fid: (r.id, r.name, r.tier, r.v) for r in arctic.sql("SELECT * FROM db.out").collect()}
    assert rows == expected, f"batch of each file: {met}; killed after its commit: {killed}"
    assert len({v for _, v in met.values()}) >= 3  # the dimension did change between batches

    # Exactly once: each micro-batch committed to db.out at most once, and no more rows than facts.
    summaries = [versions.summary_of(s) for s in versions.snapshots_in_order(arctic.table("db.out").change)]
    batches = [int(s[versions.STREAM_BATCH_ID]) for s in summaries if versions.STREAM_BATCH_ID in s]
    assert len(batches) == len(set(batches))
    assert sum(int(s.get("added-records", 0)) for s in summaries) == STEPS * FACTS
