"""The driver of tests/e2e/test_cluster.py: a short reference-model run and optimizes on a cluster.

    python cluster_workload.py MASTER_URL WAREHOUSE SEED

Connects with ``arctic_sql.connect(master=...)``, applies a seeded random sequence of upserts,
deletes and merges to a primary-key table while keeping a plain-Python model, optimizes (``CALL
system.optimize`` minor and full, ``ALTER TABLE ... COMPACT MAJOR``) and compares the table with the
model after every step, and reads one earlier version back. Exits non-zero at the first difference;
the last line of stdout is a JSON summary (the app id and the executors) for the test to check.
"""

from __future__ import annotations

import json
import random
import sys
import time

import arctic_sql

IDS = range(40)
PARTS = ("a", "b")


def _values(rows: list[tuple]) -> str:
    return ", ".join(f"({i}, '{p}', {v})" for i, p, v in rows)


def _rows(rng: random.Random, count: int) -> list[tuple]:
    keys = rng.sample([(i, p) for i in IDS for p in PARTS], count)
    return [(i, p, rng.randint(0, 999)) for i, p in keys]


def upsert(session, model: dict, rng: random.Random) -> str:
    rows = _rows(rng, rng.randint(3, 12))
    session.sql(f"INSERT INTO db.t VALUES {_values(rows)}")
    model.update({(i, p): v for i, p, v in rows})
    return f"INSERT {len(rows)} rows"


def delete(session, model: dict, rng: random.Random) -> str:
    ids = rng.sample(list(IDS), 6)
    session.sql(f"DELETE FROM db.t WHERE id IN ({', '.join(map(str, ids))})")
    for key in [k for k in model if k[0] in ids]:
        del model[key]
    return f"DELETE ids {ids}"


def merge(session, model: dict, rng: random.Random) -> str:
    """Upserts and deletes in one MERGE: a source row with v < 0 deletes its key."""
    rows = [(i, p, -1 if rng.random() < 0.3 else v) for i, p, v in _rows(rng, rng.randint(4, 10))]
    session.sql(f"""MERGE INTO db.t t USING (SELECT * FROM VALUES {_values(rows)} AS s(id, p, v)) s
                    ON t.id = s.id AND t.p = s.p
                    WHEN MATCHED AND s.v < 0 THEN DELETE
                    WHEN MATCHED THEN UPDATE SET *
                    WHEN NOT MATCHED AND s.v >= 0 THEN INSERT *""")
    for i, p, v in rows:
        if v < 0:
            model.pop((i, p), None)
        else:
            model[(i, p)] = v
    return f"MERGE {len(rows)} rows"


def optimize(mode: str):
    def step(session, model: dict, rng: random.Random) -> str:
        sql = (f"ALTER TABLE db.t COMPACT {mode.upper()}" if mode == "major"
               else f"CALL system.optimize(table => 'db.t', mode => '{mode}')")
        results = session.sql(sql).collect()
        assert any(r["committed"] for r in results), f"{sql} committed nothing: {results}"
        return sql

    return step


def check(session, model: dict, what: str, version: int | None = None) -> None:
    at = f" VERSION AS OF {version}" if version is not None else ""
    found = {(r["id"], r["p"]): r["v"] for r in session.sql(f"SELECT id, p, v FROM db.t{at}").collect()}
    if found != model:
        missing = {k: v for k, v in model.items() if found.get(k) != v}
        extra = {k: v for k, v in found.items() if model.get(k) != v}
        sys.exit(f"after {what}{at}: the table differs from the model: expected {missing}, found {extra}")


def main(master: str, warehouse: str, seed: int) -> None:
    started = time.monotonic()
    rng = random.Random(seed)
    session = arctic_sql.connect(warehouse=warehouse, master=master, spark_conf={
        "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
        "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4",
        # The first job waits for both executors, so that both workers run tasks from the start.
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
    })
    session.sql("CREATE DATABASE db")
    session.sql("""CREATE TABLE db.t (id BIGINT, p STRING, v INT, PRIMARY KEY (id, p)) PARTITIONED BY (p)
                   TBLPROPERTIES ('base.file-index.hash-bucket' = '2',
                                  'change.file-index.hash-bucket' = '2')""")
    print(f"{time.monotonic() - started:6.1f} s  connected, table created", flush=True)
    model: dict = {}
    steps = [upsert, upsert] + [rng.choice([upsert, delete, merge]) for _ in range(3)] + [optimize("minor")]
    steps += [merge, delete, optimize("major"), upsert, optimize("full")]
    versions: list[tuple[int, dict]] = []
    for step in steps:
        what = step(session, model, rng)
        print(f"{time.monotonic() - started:6.1f} s  {what}", flush=True)
        check(session, model, what)
        if not what.startswith(("CALL", "ALTER")):  # a data commit: a new version (optimizing makes none)
            version = session.sql("SELECT get_latest_version('db.t') AS v").collect()[0]["v"]
            versions.append((version, dict(model)))
    version, state = versions[len(versions) // 2]
    check(session, state, "time travel", version)
    sc = session.spark.sparkContext
    executors = sorted(sc._jsc.sc().getExecutorMemoryStatus().keySet().toList().mkString(",").split(","))
    print(json.dumps({"master": sc.master, "app_id": sc.applicationId, "block_managers": executors,
                      "rows": len(model), "versions": len(versions)}), flush=True)
    session.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
