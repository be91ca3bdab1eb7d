"""Disk stays bounded under a long stream: two days of a keyed upsert stream at compressed time.

    .venv/bin/python -m benchmarks.disk_bounded [--hours 48] [--seconds-per-hour 5] [--keys 20000]
        [--rows-per-second 500] [--change-ttl-hours 24]

A Spark structured stream (the rate source turned into upserts and, one row in ten, deletes over
``--keys`` keys) writes a keyed table through the arctic sink once a second, while the optimizer
service runs in the same process on the same Spark. Nothing is tuned: the table keeps its default
properties, and only time is compressed. One simulated hour lasts ``--seconds-per-hour`` real
seconds, so that

- ``snapshot.keep.duration`` (default 12 hours) and the change-data TTL become that many simulated
  hours of real minutes (the TTL's default is 7 days, longer than the run: ``--change-ttl-hours``
  sets it, 24 by default, so that the run shows what happens after it too);
- the service's hourly expiration (with the change-data TTL) runs every simulated hour.

Every simulated hour it records the files and bytes under the table's folder (base data, change data,
metadata and records), the snapshots the two stores keep and the rows the table holds. It prints
them, writes ``benchmarks/results/disk_bounded.json`` and, where matplotlib is installed, plots
``benchmarks/plots/disk_bounded.png``. Bounded means: once the retention and the TTL have passed,
files and bytes stop growing. The summary compares the growth per hour over the last quarter of the
run with the growth over the first (a ratio near 0, or below, is flat).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time

import arctic_sql
from arctic_sql.optimizer.service import Service
from arctic_sql.spark import local_session
from arctic_sql.table.format import layout


def sample(root: str) -> dict[str, int]:
    """Files and bytes under a table's folder, by what they are."""
    counts = {
        f"{kind}_{what}": 0
        for kind in ("base_data", "change_data", "metadata")
        for what in ("files", "bytes")
    }
    for folder, _, names in os.walk(root):
        relative = os.path.relpath(folder, root)
        kind = (
            "base_data"
            if relative.startswith("base/data")
            else "change_data"
            if relative.startswith("change/data")
            else "metadata"
        )
        for name in names:
            try:
                size = os.path.getsize(os.path.join(folder, name))
            except FileNotFoundError:  # removed by expiration while we walked
                continue
            counts[f"{kind}_files"] += 1
            counts[f"{kind}_bytes"] += size
    counts["files"] = sum(v for k, v in counts.items() if k.endswith("_files"))
    counts["bytes"] = sum(v for k, v in counts.items() if k.endswith("_bytes"))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=int, default=48, help="simulated hours to stream")
    parser.add_argument(
        "--seconds-per-hour",
        type=int,
        default=5,
        help="real seconds a simulated hour lasts (a multiple of 5: retention and TTL are whole minutes)",
    )
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--rows-per-second", type=int, default=500)
    parser.add_argument("--change-ttl-hours", type=int, default=24)
    parser.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "disk_bounded.json")
    )
    args = parser.parse_args()
    if args.seconds_per_hour % 5:
        parser.error(
            "--seconds-per-hour must be a multiple of 5 (12 hours of retention must be whole minutes)"
        )

    def minutes(hours: int) -> int:
        """Real minutes that ``hours`` simulated hours last (the properties count whole minutes)."""
        return max(1, round(hours * args.seconds_per_hour / 60))

    work = tempfile.mkdtemp(prefix="disk-bounded-")
    spark = local_session(work, {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2"})
    session = arctic_sql.connect(warehouse=os.path.join(work, "wh"), spark=spark)
    session.sql("CREATE DATABASE db")
    keep_hours = 12  # snapshot.keep.duration's default, in hours
    session.sql(
        "CREATE TABLE db.t (id BIGINT, amount BIGINT, note STRING, PRIMARY KEY (id)) TBLPROPERTIES ("
        f"'snapshot.keep.duration' = '{minutes(keep_hours)}', "
        f"'change.data.ttl.minutes' = '{minutes(args.change_ttl_hours)}')"
    )
    root = layout.table_root(session.table("db.t").base.location()).removeprefix("file://")

    hour_ms = args.seconds_per_hour * 1000
    service = Service(
        spark, session.catalog, maintenance_intervals_ms={"expire": hour_ms, "orphans": 24 * hour_ms}
    )
    optimizer = threading.Thread(target=service.run, args=(1.0,), daemon=True)

    changes = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", args.rows_per_second)
        .load()
        .selectExpr(
            f"(value * 7919) % {args.keys} AS id",
            "value AS amount",
            "concat('note ', value) AS note",
            "CASE WHEN value % 10 = 0 THEN 'delete' ELSE 'upsert' END AS _change_type",
        )
    )
    query = (
        changes.writeStream.format("arctic")
        .option("checkpointLocation", os.path.join(work, "checkpoint"))
        .option("sequenceColumn", "amount")  # the rate's counter: a batch may touch a key twice
        .trigger(processingTime="1 second")
        .start("db.t")
    )
    _first_commit(session, query)  # Spark's first micro-batch starts its Python workers: not a simulated hour
    optimizer.start()
    samples = []
    started = time.monotonic()
    try:
        for hour in range(1, args.hours + 1):
            time.sleep(max(0.0, started + hour * args.seconds_per_hour - time.monotonic()))
            if query.exception() is not None:
                raise RuntimeError(f"the stream failed: {query.exception()}")
            table = session.table("db.t")
            counts = sample(root)
            counts.update(
                hour=hour,
                load=round(os.getloadavg()[0], 1),
                base_snapshots=len(table.base.metadata.snapshots),
                change_snapshots=len(table.change.metadata.snapshots),
                batches=len(query.recentProgress),
            )
            samples.append(counts)
            print(
                f"hour {hour:3d}: {counts['files']:5d} files {counts['bytes'] / 1e6:8.2f} MB "
                f"(base {counts['base_data_files']}, change {counts['change_data_files']}, "
                f"metadata {counts['metadata_files']}); snapshots {counts['base_snapshots']}+"
                f"{counts['change_snapshots']}; load {counts['load']}",
                flush=True,
            )
    finally:
        query.stop()
        service.stopping.set()
        optimizer.join(timeout=120)
    rows = session.sql("SELECT count(*) FROM db.t").collect()[0][0]
    summary = _summary(samples, keep_hours, args.change_ttl_hours)
    summary.update(rows=rows, keys=args.keys)
    print(json.dumps(summary, indent=2))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"args": vars(args), "samples": samples, "summary": summary}, f, indent=2)
    _plot(samples, keep_hours, args.change_ttl_hours)
    spark.stop()


def _first_commit(session, query, timeout_s: float = 600) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while session.table("db.t").change.current_snapshot() is None:
        if query.exception() is not None:
            raise RuntimeError(f"the stream failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the stream committed nothing in {timeout_s:.0f} s")
        time.sleep(0.5)


def _summary(samples: list[dict], keep_hours: int, ttl_hours: int) -> dict:
    """Growth per hour over the first and the last quarter of the run, in files and bytes."""
    quarter = max(2, len(samples) // 4)
    first, last = samples[:quarter], samples[-quarter:]

    def rate(part: list[dict], key: str) -> float:
        return (part[-1][key] - part[0][key]) / max(1, part[-1]["hour"] - part[0]["hour"])

    out = {
        "retention_hours": keep_hours,
        "change_ttl_hours": ttl_hours,
        "peak_files": max(s["files"] for s in samples),
        "last_files": samples[-1]["files"],
        "peak_mb": round(max(s["bytes"] for s in samples) / 1e6, 2),
        "last_mb": round(samples[-1]["bytes"] / 1e6, 2),
    }
    for key in ("files", "bytes"):
        early, late = rate(first, key), rate(last, key)
        out[f"{key}_per_hour_first_quarter"] = round(early, 1)
        out[f"{key}_per_hour_last_quarter"] = round(late, 1)
        out[f"{key}_growth_ratio_last_vs_first"] = round(late / early, 3) if early else None
    return out


def _plot(samples: list[dict], keep_hours: int, ttl_hours: int) -> None:
    try:
        import matplotlib
    except ImportError:
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = [s["hour"] for s in samples]
    fig, (files, size) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for kind in ("base_data", "change_data", "metadata"):
        files.plot(hours, [s[f"{kind}_files"] for s in samples], label=kind.replace("_", " "))
        size.plot(hours, [s[f"{kind}_bytes"] / 1e6 for s in samples], label=kind.replace("_", " "))
    for axis in (files, size):
        axis.axvline(keep_hours, color="grey", linestyle="--", linewidth=0.8)
        axis.axvline(ttl_hours, color="grey", linestyle=":", linewidth=0.8)
        axis.legend(loc="upper left", fontsize=8)
    files.set_ylabel("files")
    size.set_ylabel("MB")
    size.set_xlabel(f"simulated hours (dashed: {keep_hours} h retention, dotted: {ttl_hours} h change TTL)")
    files.set_title("A keyed upsert stream with the optimizer service: files and bytes on disk")
    out = os.path.join(os.path.dirname(__file__), "plots", "disk_bounded.png")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"plot: {out}")


if __name__ == "__main__":
    main()
