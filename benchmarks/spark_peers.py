"""arctic-sql beside the table formats a Spark user weighs, each in its own Spark: Delta and Iceberg.

    .venv/bin/python -m benchmarks.spark_peers --rows 200000 --batches 1000,10000 --commits 5   # W0 (~10 min here)
    .venv/bin/python -m benchmarks.spark_peers --rows 2000000 --batches 20000 --commits 5      # W1's shape

arctic-sql runs in this process's Spark (pyspark 4.3); each peer runs in a worker process with the
pyspark its runtime is built for and its pinned jars (``scripts/jars.lock``: Delta 4.4.0 on pyspark
4.2.1, Iceberg 1.12.0 on pyspark 4.1.4), driven one step at a time over a line protocol
(``benchmarks/systems/spark_peer_worker.py``). Only one system works at any moment, and the order
rotates from step to step, so the machine's load hits all alike.

For each batch size: a fresh table per system loaded with the same ``--rows`` rows (B1: the median
of ``--loads`` loads, the others into scratch tables), then ``--commits`` MERGEs of the same CDC
batches (``benchmarks/datagen.py``: 70% updates, 20% inserts, 10% deletes by an ``op`` column),
commit by commit (W0; W1 at W1's sizes). On the last size's tables:
R1, the full-scan aggregate, in rotated rounds; O1, each system's full compaction; R2, the aggregate
again. Spark's floor is measured in the same rounds: its own Parquet write of the load (B1), the
batch into a no-op Python data source (W0), a plain Parquet read of the same rows (R1/R2). Every
system's final rows are checked against the reference model, before and after compaction.

Prints medians with arctic/system ratios beside absolute times, writes
``benchmarks/results/spark_peers.json`` and ``spark_peers.png``. Exit code 1 when a checksum disagrees.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import traceback

from benchmarks import datagen
from benchmarks.systems.common import R1_RUNS, R1_SQL
from benchmarks.systems.interleaved import rotated
from benchmarks.systems.spark_peer import PEERS, Arctic, Peer, SparkFloor, StepError, System, unserved_peers
from benchmarks.upsert_stream import RESULTS, fmt, machine, save_figure, source_tree, versions

FIGURES = ("B1", "W0", "R1", "O1", "R2")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.spark_peers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--rows", type=int, default=200_000, help="rows loaded into every table (default 200,000)"
    )
    parser.add_argument(
        "--batches", default="1000,10000", help="rows per commit, one table each (default 1000,10000)"
    )
    parser.add_argument("--commits", type=int, default=5, help="commits per batch size (default 5)")
    parser.add_argument(
        "--loads", type=int, default=3, help="B1 loads per system and batch size, median taken (default 3)"
    )
    parser.add_argument(
        "--peers", default="delta,iceberg", help="comma-separated subset of " + ",".join(PEERS)
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--step-timeout", type=float, default=900.0, help="seconds one peer step may take")
    parser.add_argument("--work", default=os.path.join(RESULTS, "work"), help="data and table directory")
    parser.add_argument("--out", default=os.path.join(RESULTS, "spark_peers.json"))
    args = parser.parse_args(argv)
    unknown = set(args.peers.split(",")) - set(PEERS)
    if unknown:
        parser.error(f"unknown peers: {', '.join(sorted(unknown))}")
    if args.loads < 1:
        parser.error("--loads must be at least 1: the last load fills the table the other figures use")
    return args


class Run:
    """The systems and every time they took, by figure and key (a batch size, or '' for one-off figures)."""

    def __init__(self, systems: list[System]) -> None:
        self.systems = systems
        self.times: dict[str, dict[str, dict[str, list[float]]]] = {}
        self.errors: dict[str, list[dict]] = {s.name: [] for s in systems}

    def alive(self) -> list[System]:
        return [s for s in self.systems if s.error is None]

    def step(self, system: System, figure: str, key: str, run) -> object:  # noqa: ANN001
        """``run()``'s seconds recorded under ``figure``/``key``; a failure stops that system only."""
        try:
            seconds = run()
        except Exception as e:  # noqa: BLE001 - recorded and printed; the other systems go on
            detail = str(e) if isinstance(e, StepError) else traceback.format_exc(limit=6)
            system.error = f"{figure} {key}: {detail.strip().splitlines()[-1]}"
            self.errors[system.name].append({"figure": figure, "key": key, "error": detail})
            print(f"!! {system.label} failed at {figure} {key}: {system.error}", flush=True)
            return None
        if isinstance(seconds, float):
            self.times.setdefault(figure, {}).setdefault(key, {}).setdefault(system.name, []).append(seconds)
        return seconds

    def median(self, figure: str, key: str, name: str) -> float | None:
        values = self.times.get(figure, {}).get(key, {}).get(name)
        return statistics.median(values) if values else None


def read_rounds(run: Run, figure: str, table: str) -> dict[str, list]:
    """One untimed warm-up query per system, then R1_RUNS timed rounds, each in a rotated order."""
    rows: dict[str, list] = {}
    for system in run.alive():
        run.step(system, "warm-up", figure, lambda s=system: s.query(table, R1_SQL) and None)
    for round_ in range(R1_RUNS):
        for system in rotated(run.alive(), round_):

            def query(s: System = system) -> float:
                result, seconds = s.query(table, R1_SQL)
                rows[s.name] = sorted(
                    [str(v) for v in (r.values() if isinstance(r, dict) else r)] for r in result
                )
                return seconds

            run.step(system, figure, "", query)
    return rows


def warm_up(peer: Peer, data: str) -> None:
    """A throw-away table: load, two MERGEs, the query and the compaction, untimed."""
    peer.load("warm", data)
    for index in (0, 1):
        peer.merge("warm", datagen.batch_path(data, index))
    peer.query("warm", R1_SQL)
    peer.optimize("warm")


def file_counts(run: Run, table: str, when: str) -> dict[str, dict]:
    counts: dict[str, dict] = {}
    for system in run.alive():
        if not isinstance(system, SparkFloor):
            run.step(system, "files", when, lambda s=system: counts.__setitem__(s.name, s.files(table)))
    return counts


def check(run: Run, table: str, reference: dict, when: str) -> dict[str, dict]:
    checks = {}
    for system in run.alive():
        if isinstance(system, SparkFloor):
            continue
        got = None

        def checksum(s: System = system) -> None:
            nonlocal got
            got = s.checksum(table)

        run.step(system, "checksum", when, checksum)
        checks[system.name] = {"agrees": got == reference if got is not None else None, "got": got}
    return checks


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # The peers' workers run with this (spark_peer.Peer); this process's Spark gets the same.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    started = time.time()
    sizes = [int(s) for s in args.batches.split(",")]
    datas = {
        size: datagen.generate(
            datagen.Workload(
                args.rows / datagen.ROWS_AT_SCALE_1, args.commits, args.seed, fixed_batch_rows=size
            ),
            args.work,
        )
        for size in sizes
    }
    work = os.path.join(args.work, "spark-peers-run")
    shutil.rmtree(work, ignore_errors=True)
    loadavg = [os.getloadavg()]
    arctic = Arctic(os.path.join(work, "arctic"), datas[sizes[0]])
    spark = arctic.session.spark
    # The peers' Spark gets the settings of arctic-sql's that bear on speed.
    conf = {
        key: spark.conf.get(key)
        for key in (
            "spark.master",
            "spark.sql.shuffle.partitions",
            "spark.sql.adaptive.enabled",
            "spark.driver.memory",
        )
    }
    peers, not_run = [], {}
    for name in args.peers.split(","):
        try:
            peers.append(Peer(PEERS[name], os.path.join(work, name), conf, args.step_timeout))
        except Exception as e:  # noqa: BLE001 - a peer whose jars or venv are missing is reported, not run
            not_run[name] = str(e)
    floor = SparkFloor(arctic.session, os.path.join(work, "floor"))
    run = Run([arctic, *peers, floor])
    for peer in peers:
        run.step(peer, "start", "", peer.ready)
    # Peers' one-off costs (class loading, JIT, first MERGE and compaction) outside the timings, as
    # arctic.start does for arctic-sql.
    for peer in run.alive():
        if isinstance(peer, Peer):
            run.step(peer, "warm-up", "", lambda p=peer: warm_up(p, datas[sizes[0]]))
    print(f"peer settings: {conf}; started {', '.join(s.label for s in run.alive())}", flush=True)

    checks: dict[str, dict] = {}
    for size in sizes:
        data, table = datas[size], f"orders_{size}"
        reference = datagen.read_manifest(data)["reference_checksums"]
        # B1 is the median of --loads loads per system, rotated: the first large load of a process
        # pays one-off costs its warm-up did not (one sample made arctic-sql 5.7x Iceberg, its later
        # loads of the same rows taking a third of its first). The last load fills the table W0 uses.
        for round_ in range(args.loads):
            name = table if round_ == args.loads - 1 else f"{table}_load{round_}"
            for system in rotated(run.alive(), sizes.index(size) + round_):
                run.step(system, "B1", str(size), lambda s=system, n=name: s.load(n, data))
        for index in range(args.commits):
            for system in rotated(run.alive(), index):
                seconds = run.step(
                    system, "W0", str(size), lambda s=system: s.merge(table, datagen.batch_path(data, index))
                )
                if seconds is not None:
                    print(
                        f"[{system.label}] {size:,} rows, commit {index + 1}/{args.commits}: {seconds:.3f} s",
                        flush=True,
                    )
        loadavg.append(os.getloadavg())
        checks[f"W0 {size}"] = check(run, table, reference[args.commits], f"after W0 {size}")
    table, data = f"orders_{sizes[-1]}", datas[sizes[-1]]
    reference = datagen.read_manifest(data)["reference_checksums"][args.commits]
    if arctic.error is None:
        floor.plain_copy_of(arctic, table)
    files = {"before O1": file_counts(run, table, "before O1")}
    rows = {"R1": read_rounds(run, "R1", table)}
    for system in rotated(run.alive(), 1):
        run.step(system, "O1", "", lambda s=system: s.optimize(table))
    files["after O1"] = file_counts(run, table, "after O1")
    rows["R2"] = read_rounds(run, "R2", table)
    checks["after O1"] = check(run, table, reference, "after O1")
    loadavg.append(os.getloadavg())
    for peer in peers:
        peer.close()

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    try:
        doc = report(args, run, checks, files, rows, not_run, conf, loadavg)
    except Exception:
        with open(args.out, "w", encoding="utf-8") as f:  # what was measured survives a broken report
            json.dump(
                {"times": run.times, "errors": run.errors, "checksums": checks}, f, indent=1, default=str
            )
        raise
    doc["total_wall_s"] = time.time() - started
    plot(doc, os.path.splitext(args.out)[0] + ".png")
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, default=str)
    print(
        f"results: {os.path.relpath(args.out)}"
        + (f", plot: {os.path.relpath(doc['plot'])}" if "plot" in doc else "")
        + f"  ({doc['total_wall_s']:.0f} s)"
    )
    spark.stop()
    return 1 if any(c["agrees"] is False for by in checks.values() for c in by.values()) else 0


def figure_name(figure: str, key: str, rows: int) -> str:
    if figure == "B1":
        return f"B1 load {rows:,} rows (table {int(key):,})"
    if figure == "W0":
        return f"W0 MERGE {int(key):,} rows"
    return {"R1": "R1 read, merge-on-read", "O1": "O1 full compaction", "R2": "R2 read after O1"}[figure]


def report(args, run: Run, checks, files, rows, not_run, conf, loadavg) -> dict:  # noqa: ANN001, PLR0913
    systems = run.systems
    lines = []
    for figure in FIGURES:
        for key in sorted(run.times.get(figure, {}), key=lambda k: int(k or 0)):
            lines.append((figure, key, figure_name(figure, key, args.rows)))
    arctic_name = systems[0].name
    width = 26
    print()
    print(
        f"spark-peers: {args.rows:,} rows, {args.commits} commits per batch size, medians in seconds; "
        f"(x) = arctic-sql / that system, below 1 arctic-sql is faster; load average {loadavg[0][0]:.1f} "
        f"to {max(load[0] for load in loadavg):.1f} on {os.cpu_count()} cores"
    )
    print(f"{'figure':<34}" + "".join(f"{s.label:>{width}}" for s in systems))
    table = []
    for figure, key, name in lines:
        a = run.median(figure, key, arctic_name)
        cells, row = [], {"figure": figure, "key": key, "name": name}
        for system in systems:
            m = run.median(figure, key, system.name)
            row[system.name] = m
            r = a / m if a is not None and m else None
            cells.append(fmt(m) + ("" if system.name == arctic_name or r is None else f" ({r:.2f}x)"))
        table.append(row)
        print(f"{name:<34}" + "".join(f"{c:>{width}}" for c in cells))
    for when, by in checks.items():
        print(
            f"{'checksum ' + when:<34}"
            + "".join(
                f"{ {True: 'ok', False: 'MISMATCH', None: '-'}[by[s.name]['agrees']] if s.name in by else '':>{width}}"
                for s in systems
            )
        )
    for system in systems:
        if system.error:
            print(f"!! {system.label}: {system.error}")
    for name, why in not_run.items():
        print(f"!! {name} not run: {why}")
    for group, artifact in unserved_peers().items():
        print(
            f"-- {group} not run: {artifact} is not served by the reachable Maven Central (scripts/jars.lock)"
        )
    for system in systems:
        if isinstance(system, Peer):
            v = system.info.get("versions", {})
            print(
                f"-- {system.label}: Spark {v.get('spark')}, {', '.join(v.get('jars', []))}; "
                f"{PEERS[system.name].settings}"
            )
    print(f"-- files before and after O1: {json.dumps(files)}")
    return {
        "benchmark": "spark-peers",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "versions": versions(),
        "source": source_tree(),
        "loadavg": loadavg,
        "spark_conf": conf,
        "parameters": {
            "rows": args.rows,
            "batches": args.batches,
            "commits": args.commits,
            "seed": args.seed,
        },
        "systems": {
            s.name: {
                "label": s.label,
                "error": s.error,
                "info": s.info,
                "settings": PEERS[s.name].settings if s.name in PEERS else None,
            }
            for s in systems
        },
        "table": table,
        "times": run.times,
        "errors": run.errors,
        "checksums": checks,
        "files": files,
        "r_rows": rows,
        "not_run": not_run,
        "unserved": unserved_peers(),
    }


def plot(doc: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    labels = {name: s["label"] for name, s in doc["systems"].items()}
    fig, (commits, medians) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = {
        name: f"C{i}" for i, name in enumerate(labels)
    }  # one colour per system, one line style per size
    for style, (size, by) in zip(("-", "--", ":", "-."), doc["times"].get("W0", {}).items()):
        for name, times in by.items():
            commits.plot(
                range(1, len(times) + 1),
                times,
                style,
                marker="o",
                color=colors[name],
                label=f"{labels[name]}, {int(size):,} rows",
            )
    commits.set(xlabel="commit", ylabel="seconds", yscale="log", title="W0: MERGE of one CDC batch")
    rows = doc["table"]
    names = list(labels)
    step = 0.8 / len(names)
    for i, name in enumerate(names):
        medians.bar(
            [x + i * step for x in range(len(rows))],
            [r.get(name) or 0 for r in rows],
            step,
            label=labels[name],
        )
    medians.set_xticks(
        [x + 0.4 - step / 2 for x in range(len(rows))],
        [r["name"].replace(" rows", "").replace("(table ", "(") for r in rows],
        rotation=30,
        ha="right",
    )
    medians.set(ylabel="median seconds", yscale="log", title=f"{doc['parameters']['rows']:,} rows: medians")
    for ax in (commits, medians):
        ax.grid(True, which="both", alpha=0.3)
    save_figure(fig, doc, path)


if __name__ == "__main__":
    sys.exit(main())
