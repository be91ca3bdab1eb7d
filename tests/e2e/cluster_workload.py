"""A driver of tests/e2e/test_cluster.py: a reference-model run with optimizes on a cluster.

    python cluster_workload.py MASTER WAREHOUSE SEED [--catalog FILE] [--parts a,b] [--create] [--short]

Connects with ``arctic_sql.connect(master=...)`` (``--catalog``: a pyiceberg YAML file of the catalog
``arctic``, kept off the command line since it holds credentials; without it the embedded catalog of
a local warehouse), applies a seeded random sequence of upserts, deletes and merges to ``db.t`` while
keeping a plain-Python model, optimizes (``CALL system.optimize`` minor, major and full) and compares
the table with the model after every step; then reads versions back with ``VERSION AS OF`` and
``VERSION BETWEEN``. It writes and checks only the partitions ``--parts`` names, so that two drivers
can share the table (and the optimizer service optimizes it too). ``--create`` creates the table.
Exits non-zero at the first difference; the last line of stdout is a JSON summary for the test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import arctic_sql

IDS = range(40)


def _values(rows: list[tuple]) -> str:
    return ", ".join(f"({i}, '{p}', {v})" for i, p, v in rows)


class Workload:
    def __init__(self, session, parts: tuple[str, ...], seed: int) -> None:
        self.session = session
        self.parts = parts
        self.rng = random.Random(seed)
        self.model: dict = {}
        self.optimizes_committed = 0

    def _rows(self, count: int) -> list[tuple]:
        keys = self.rng.sample([(i, p) for i in IDS for p in self.parts], count)
        return [(i, p, self.rng.randint(0, 999)) for i, p in keys]

    @property
    def _own(self) -> str:
        return f"p IN ({', '.join(repr(p) for p in self.parts)})"

    def upsert(self) -> str:
        rows = self._rows(self.rng.randint(3, 12))
        self.session.sql(f"INSERT INTO db.t VALUES {_values(rows)}")
        self.model.update({(i, p): v for i, p, v in rows})
        return f"INSERT {len(rows)} rows"

    def delete(self) -> str:
        # Ids this driver holds: a statement that changes no row makes no version, and the test counts
        # each driver's versions.
        held = sorted({i for i, _ in self.model})
        if not held:
            return self.upsert()
        ids = self.rng.sample(held, min(len(held), 6))
        self.session.sql(f"DELETE FROM db.t WHERE id IN ({', '.join(map(str, ids))}) AND {self._own}")
        for key in [k for k in self.model if k[0] in ids]:
            del self.model[key]
        return f"DELETE ids {ids}"

    def merge(self) -> str:
        """Upserts and deletes in one MERGE: a source row with v < 0 deletes its key."""
        rows = [
            (i, p, -1 if self.rng.random() < 0.3 else v) for i, p, v in self._rows(self.rng.randint(4, 10))
        ]
        rows[0] = rows[0][:2] + (abs(rows[0][2]),)  # an upsert at least: the MERGE changes a row
        self.session.sql(f"""MERGE INTO db.t t USING (SELECT * FROM VALUES {_values(rows)} AS s(id, p, v)) s
                             ON t.id = s.id AND t.p = s.p
                             WHEN MATCHED AND s.v < 0 THEN DELETE
                             WHEN MATCHED THEN UPDATE SET *
                             WHEN NOT MATCHED AND s.v >= 0 THEN INSERT *""")
        for i, p, v in rows:
            if v < 0:
                self.model.pop((i, p), None)
            else:
                self.model[(i, p)] = v
        return f"MERGE {len(rows)} rows"

    def optimize(self, mode: str):
        def step() -> str:
            # Only this driver's partitions. Another driver or the optimizer service may optimize them
            # too, so a step may find nothing left to commit: the model check after it is what counts.
            sql = f"CALL system.optimize(table => 'db.t', mode => '{mode}', where => \"{self._own}\")"
            results = self.session.sql(sql).collect()
            self.optimizes_committed += sum(bool(r["committed"]) for r in results)
            return sql

        return step

    def read(self, at: str = "") -> dict:
        rows = self.session.sql(f"SELECT id, p, v FROM db.t{at} WHERE {self._own}").collect()
        return {(r["id"], r["p"]): r["v"] for r in rows}

    def check(self, expected: dict, what: str, at: str = "") -> None:
        found = self.read(at)
        if found != expected:
            missing = {k: v for k, v in expected.items() if found.get(k) != v}
            extra = {k: v for k, v in found.items() if expected.get(k) != v}
            sys.exit(f"after {what}{at}: the table differs from the model: expected {missing}, found {extra}")

    def check_between(self, start: tuple[int, dict], end: tuple[int, dict]) -> None:
        """The changes in (v1, v2], applied to the model at v1, give the model at v2."""
        (v1, before), (v2, after) = start, end
        rows = self.session.sql(
            f"SELECT id, p, v, _change_type, _change_version FROM db.t VERSION BETWEEN {v1} AND {v2}"
        ).collect()
        state = dict(before)
        for r in rows:
            if r["p"] not in self.parts:
                continue
            if not v1 < r["_change_version"] <= v2:
                sys.exit(f"VERSION BETWEEN {v1} AND {v2} returned a change of version {r['_change_version']}")
            if r["_change_type"] == "delete":
                state.pop((r["id"], r["p"]), None)
            else:
                state[(r["id"], r["p"])] = r["v"]
        if state != after:
            sys.exit(
                f"VERSION BETWEEN {v1} AND {v2} applied to version {v1} is not version {v2}: {state} != {after}"
            )


def connect(args: argparse.Namespace):
    return arctic_sql.connect(
        warehouse=args.warehouse,
        master=args.master,
        config_file=args.catalog,
        spark_conf={
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": str(args.cores),
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            # The first job waits for every executor, so that each one runs tasks from the start.
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        },
    )


def main(args: argparse.Namespace) -> None:
    started = time.monotonic()
    session = connect(args)
    if args.create:
        session.sql("CREATE DATABASE db")
        session.sql("""CREATE TABLE db.t (id BIGINT, p STRING, v INT, PRIMARY KEY (id, p)) PARTITIONED BY (p)
                       TBLPROPERTIES ('base.file-index.hash-bucket' = '2',
                                      'change.file-index.hash-bucket' = '2')""")
    print(f"{time.monotonic() - started:6.1f} s  connected", flush=True)
    work = Workload(session, tuple(args.parts.split(",")), args.seed)
    rng = work.rng
    if args.short:  # a second driver's share: each kind of change, and an optimize between them
        steps = [work.upsert, work.delete, work.optimize("minor"), work.merge, work.upsert]
    else:
        steps = [work.upsert, work.upsert] + [
            rng.choice([work.upsert, work.delete, work.merge]) for _ in range(3)
        ]
        steps += [
            work.optimize("minor"),
            work.merge,
            work.delete,
            work.optimize("major"),
            work.upsert,
            work.optimize("full"),
        ]
    versions: list[tuple[int, dict]] = []
    for step in steps:
        what = step()
        print(f"{time.monotonic() - started:6.1f} s  {what}", flush=True)
        work.check(work.model, what)
        if not what.startswith("CALL"):  # a data commit: a new version (optimizing makes none)
            # Another driver may have committed since: that version holds this driver's rows too.
            version = session.sql("SELECT get_latest_version('db.t') AS v").collect()[0]["v"]
            versions.append((version, dict(work.model)))
    work.check(
        versions[len(versions) // 2][1], "time travel", f" VERSION AS OF {versions[len(versions) // 2][0]}"
    )
    work.check_between((0, {}), versions[-1])
    work.check_between(versions[1], versions[-2])
    sc = session.spark.sparkContext
    executors = sorted(sc._jsc.sc().getExecutorMemoryStatus().keySet().toList().mkString(",").split(","))
    # What the executors' environment holds of AWS's variables: table I/O must not need any.
    aws = (
        sc.parallelize(range(4), 4)
        .flatMap(lambda _: [k for k in os.environ if k.startswith("AWS_")])
        .collect()
    )
    print(
        json.dumps(
            {
                "master": sc.master,
                "app_id": sc.applicationId,
                "block_managers": executors,
                "rows": sorted([i, p, v] for (i, p), v in work.model.items()),
                "versions": [v for v, _ in versions],
                "optimizes_committed": work.optimizes_committed,
                "executor_aws_variables": sorted(set(aws)),
            }
        ),
        flush=True,
    )
    session.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("master")
    parser.add_argument("warehouse")
    parser.add_argument("seed", type=int)
    parser.add_argument("--catalog", help="a pyiceberg YAML file of the catalog 'arctic'")
    parser.add_argument("--parts", default="a,b", help="the partitions this driver writes and checks")
    parser.add_argument("--create", action="store_true", help="create db.t first")
    parser.add_argument("--cores", type=int, default=2, help="cores (one-core executors) to take")
    parser.add_argument("--short", action="store_true", help="five steps instead of eleven")
    main(parser.parse_args())
