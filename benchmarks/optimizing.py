"""The self-optimizing benchmark: figures O1, L1, R1, R2, S1 and A1 (README.md here).

    python -m benchmarks.optimizing                          # everything, default sizes (about 35-40 min here)
    python -m benchmarks.optimizing --scale 0.1 --commits 10 --stream-scale 0.02 --stream-commits 40   # quick

Part 1 (``--scale``, ``--commits``): the upsert-stream table after C commits, nothing optimized.
arctic-sql's subprocess times the R1 query (R1), runs ``CALL system.optimize(table => ..., mode =>
'full')`` once (O1), times the query again (R2) and reads the same rows as one plain Parquet dataset
(the R2 baseline). Then one pyarrow process reads the same base and change files, applies the same
merge and writes the merged rows, one file per tree node (L1, ``benchmarks/arrow_merge.py``).

Part 2 (``--stream-scale``, ``--stream-commits``): a longer stream run twice, without and with the
self-optimizing service (``arctic-sql optimizer``, its own process, on the same warehouse), the R1
query timed after every ``--every``-th commit. S1 = median query latency over the last 10% of
commits / over the first 10%; A1 = bytes the committed optimizing processes wrote / bytes the stream
ingested into the change store.

Prints a table, writes ``benchmarks/results/optimizing.json`` and ``benchmarks/results/optimizing.png``
(query latency across the stream, with and without the service). Exit code 1 when a table's
checksum disagrees with the reference model.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from benchmarks import datagen
from benchmarks.systems.common import arrow_checksum
from benchmarks.upsert_stream import (
    RESULTS,
    check,
    fmt,
    machine,
    median,
    ratio,
    run_system,
    save_figure,
    source_tree,
    versions,
)

PARTS = ("optimize", "stream")
WINDOW = 0.1  # S1 compares the last 10% of the stream's commits with the first 10%


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.optimizing",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="part 1: N0 = 2,000,000 x scale rows (default 1)"
    )
    parser.add_argument(
        "--commits", type=int, default=20, help="part 1: commits before optimizing (default 20)"
    )
    parser.add_argument(
        "--stream-scale",
        type=float,
        default=0.1,
        help="part 2: N0 of the long stream, as a scale (default 0.1: 200,000 rows)",
    )
    parser.add_argument(
        "--stream-commits", type=int, default=200, help="part 2: commits of the stream (default 200)"
    )
    parser.add_argument("--every", type=int, default=4, help="part 2: time the query after every k-th commit")
    parser.add_argument(
        "--stream-properties",
        default="",
        help="part 2: table properties k=v,... set after the load (e.g. "
        "self-optimizing.target-size=4194304, so that base files are past fragment size)",
    )
    parser.add_argument(
        "--interval", type=float, default=2.0, help="part 2: the service's polling interval, s"
    )
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset of optimize,stream")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--l1-runs", type=int, default=3, help="timed L1 runs (median)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds one subprocess may take")
    parser.add_argument("--work", default=os.path.join(RESULTS, "work"), help="data and table directory")
    parser.add_argument("--out", default=os.path.join(RESULTS, "optimizing.json"))
    parser.add_argument("--keep-tables", action="store_true")
    args = parser.parse_args(argv)
    unknown = set(args.parts.split(",")) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    return args


# part 1: R1, O1, R2, L1 ---------------------------------------------------------------------------
def run_l1(plan_path: str, run_dir: str, runs: int, timeout: float) -> dict:
    """L1: ``benchmarks.arrow_merge`` in its own process over the files O1 read; its result and checksum."""
    import pyarrow.dataset as ds

    out, result_path = os.path.join(run_dir, "l1"), os.path.join(run_dir, "l1.json")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p)}
    print(f"--- L1: pyarrow, one process ({runs} run(s))", flush=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.arrow_merge",
            "--plan",
            plan_path,
            "--out",
            out,
            "--result",
            result_path,
            "--runs",
            str(runs),
        ],
        check=True,
        cwd=repo,
        env=env,
        timeout=timeout,
    )
    with open(result_path, encoding="utf-8") as f:
        result = json.load(f)
    result["checksum"] = arrow_checksum(
        ds.dataset(out, format="parquet").to_table(columns=["order_id", "status", "amount"])
    )
    print(
        f"   L1 median {result['median_s']:.2f} s ({result['rows']:,} rows, {result['files']} files, "
        f"{result['bytes_written']:,} bytes)",
        flush=True,
    )
    return result


def part_optimize(args: argparse.Namespace) -> dict:
    workload = datagen.Workload(args.scale, args.commits, args.seed)
    data = datagen.generate(workload, args.work)
    manifest = datagen.read_manifest(data)
    reference = manifest["reference_checksums"]
    run_dir = os.path.join(data, "runs", "arctic-optimize")
    arctic = run_system("arctic", data, run_dir, args.timeout, extra=["--optimize"])
    l1 = None
    if arctic.get("optimize_plan") and arctic.get("o1_s") is not None:
        if not arctic["optimize_input"]["same_level"]:
            arctic["errors"].append(
                {
                    "step": "L1",
                    "error": "base and change files lie at different tree levels: "
                    "L1 merges per node and needs one level",
                }
            )
        else:
            l1 = run_l1(arctic["optimize_plan"], run_dir, args.l1_runs, args.timeout)
    done = len(arctic.get("commit_s", []))
    checks = {"R1 (merge-on-read)": check(arctic, reference)}
    for name, key in (("R2 (optimized)", "checksum_optimized"), ("plain parquet", "plain_checksum")):
        if arctic.get(key) is not None:
            checks[name] = check(arctic, reference, key)
    if l1 is not None:
        checks["L1 (pyarrow)"] = {
            "agrees": l1["checksum"] == reference[done],
            "after_commits": done,
            "got": l1["checksum"],
            "expected": reference[done],
        }
    o1_rows = arctic.get("optimize_rows") or []
    r1, r2, plain = (
        median(arctic.get("r1_s")),
        median(arctic.get("r2_s")),
        median(arctic.get("plain_spark_r1_s")),
    )
    unmerged = median(arctic.get("unmerged_spark_r1_s"))
    o1, l1_s = arctic.get("o1_s"), (l1 or {}).get("median_s")
    if not args.keep_tables:
        shutil.rmtree(os.path.join(data, "runs"), ignore_errors=True)
    return {
        "parameters": {
            "scale": args.scale,
            "commits": args.commits,
            "initial_rows": manifest["initial_rows"],
            "batch_rows": manifest["batch_rows"],
            "batch_mix": manifest["batch_mix"],
        },
        "figures": {
            "R1_s": r1,
            "R2_s": r2,
            "plain_parquet_s": plain,
            "unmerged_s": unmerged,
            "O1_s": o1,
            "L1_s": l1_s,
            "O1_over_L1": ratio(o1, l1_s),
            "R1_over_R2": ratio(r1, r2),
            "R2_over_plain": ratio(r2, plain),
            "R1_over_plain": ratio(r1, plain),
            "unmerged_over_R2": ratio(unmerged, r2),
            "O1_input": arctic.get("optimize_input"),
            "O1_output_files": sum(r.get("output_files_count") or 0 for r in o1_rows),
            "O1_output_bytes": sum(r.get("output_bytes") or 0 for r in o1_rows),
            "O1_input_files_reported": sum(r.get("input_files_count") or 0 for r in o1_rows),
            "L1_output_files": (l1 or {}).get("files"),
            "L1_output_bytes": (l1 or {}).get("bytes_written"),
        },
        "checksums": checks,
        "arctic": arctic,
        "l1": l1,
    }


# part 2: S1, A1 -----------------------------------------------------------------------------------
def window_medians(points: list[list[float]]) -> tuple[float | None, float | None]:
    """Median latency over the first and over the last ``WINDOW`` of the stream's measurements (at
    least one each): with a measurement every k-th commit, the first and last 10% of the commits."""
    edge = max(1, round(len(points) * WINDOW))
    return median([s for _, s in points[:edge]]), median([s for _, s in points[-edge:]])


def part_stream(args: argparse.Namespace) -> dict:
    workload = datagen.Workload(args.stream_scale, args.stream_commits, args.seed)
    data = datagen.generate(workload, args.work)
    manifest = datagen.read_manifest(data)
    reference = manifest["reference_checksums"]
    runs, checks, figures = {}, {}, {}
    for label, extra in (("without", []), ("with", ["--service-interval", f"{args.interval:g}"])):
        run_dir = os.path.join(data, "runs", f"stream-{label}")
        properties = ["--table-properties", args.stream_properties] if args.stream_properties else []
        result = run_system(
            "arctic_stream",
            data,
            run_dir,
            args.timeout,
            extra=["--every", str(args.every), *properties, *extra],
        )
        runs[label] = result
        checks[f"stream {label} optimizer"] = check(result, reference)
        first, last = window_medians(result.get("stream_r1") or [])
        figures[f"S1_{label}_optimizer"] = ratio(last, first)
        figures[f"query_first_10pct_s_{label}"] = first
        figures[f"query_last_10pct_s_{label}"] = last
        figures[f"W1_median_commit_s_{label}"] = median(result.get("commit_s"))
        figures[f"commits_done_{label}"] = len(result.get("commit_s", []))
    opt = runs["with"].get("optimizing") or {}
    figures["A1"] = ratio(opt.get("optimize_output_bytes"), opt.get("ingested_change_bytes"))
    figures["A1_including_load"] = ratio(
        opt.get("optimize_output_bytes"),
        (opt.get("ingested_change_bytes") or 0) + (runs["with"].get("base_bytes_after_load") or 0),
    )
    figures["optimizing"] = {k: v for k, v in opt.items() if k != "optimize_ended_at"}
    service_log = (runs["with"].get("service") or {}).get("log")
    if service_log and os.path.exists(service_log):  # kept: the tables' directory goes below
        kept = os.path.splitext(args.out)[0] + "_service.log"
        shutil.copyfile(service_log, kept)
        runs["with"]["service"]["log"] = kept
    if not args.keep_tables:
        shutil.rmtree(os.path.join(data, "runs"), ignore_errors=True)
    return {
        "parameters": {
            "scale": args.stream_scale,
            "commits": args.stream_commits,
            "every": args.every,
            "table_properties": args.stream_properties,
            "service_interval_s": args.interval,
            "initial_rows": manifest["initial_rows"],
            "batch_rows": manifest["batch_rows"],
            "window": WINDOW,
        },
        "figures": figures,
        "checksums": checks,
        "runs": runs,
    }


# report -------------------------------------------------------------------------------------------
def report(doc: dict) -> None:
    print()
    opt = doc.get("optimize")
    if opt:
        p, f = opt["parameters"], opt["figures"]
        print(
            f"optimize: scale {p['scale']:g} ({p['initial_rows']:,} rows), {p['commits']} commits of "
            f"{p['batch_rows']:,} rows; O1 input {json.dumps(f['O1_input'])}"
        )
        rows = [
            ("R1 merge-on-read query, nothing optimized", f["R1_s"], ""),
            (
                "    R1's files scanned by Spark, unmerged",
                f.get("unmerged_s"),
                "wrong answer: the file-count floor",
            ),
            ("R2 same query after the full optimize", f["R2_s"], ""),
            ("    plain Parquet, same rows, same Spark", f["plain_parquet_s"], ""),
            (
                "O1 CALL system.optimize(mode => 'full')",
                f["O1_s"],
                f"{f['O1_output_files']} files, {f['O1_output_bytes']:,} bytes",
            ),
            (
                "L1 pyarrow, one process, same files",
                f["L1_s"],
                f"{f['L1_output_files']} files, {f['L1_output_bytes'] or 0:,} bytes",
            ),
        ]
        for name, seconds, note in rows:
            print(f"  {name:<44} {fmt(seconds):>8} s   {note}")
        print(
            f"  O1/L1 = {fmt(f['O1_over_L1'], 2)} (target <= 2, moonshot 1.5)   "
            f"R1/R2 = {fmt(f['R1_over_R2'], 2)} (target <= 1.5)   R2/plain = {fmt(f['R2_over_plain'], 2)}   "
            f"R1/plain = {fmt(f['R1_over_plain'], 2)}   unmerged/R2 = {fmt(f.get('unmerged_over_R2'), 2)}"
        )
    stream = doc.get("stream")
    if stream:
        p, f = stream["parameters"], stream["figures"]
        print(
            f"stream: scale {p['scale']:g} ({p['initial_rows']:,} rows), {p['commits']} commits of "
            f"{p['batch_rows']:,} rows, query after every {p['every']} commit(s), service every "
            f"{p['service_interval_s']:g} s"
        )
        for label in ("without", "with"):
            print(
                f"  {label:>7} optimizer: query first 10% {fmt(f[f'query_first_10pct_s_{label}'])} s, "
                f"last 10% {fmt(f[f'query_last_10pct_s_{label}'])} s, S1 = {fmt(f[f'S1_{label}_optimizer'], 2)}"
                f"; commit median {fmt(f[f'W1_median_commit_s_{label}'])} s over {f[f'commits_done_{label}']}"
            )
        o = f["optimizing"]
        print(
            f"  S1 with optimizer = {fmt(f['S1_with_optimizer'], 2)} (target <= 1.2; Amoro: flat with, "
            f"x2.2 without)"
        )
        print(
            f"  A1 = {fmt(f['A1'], 2)}: optimizing wrote {o.get('optimize_output_bytes', 0):,} bytes "
            f"({o.get('by_mode')}, {o.get('processes', 0)} processes {o.get('by_status')}), the stream "
            f"ingested {o.get('ingested_change_bytes', 0):,} bytes of change files; "
            f"counting the load too: {fmt(f['A1_including_load'], 2)}"
        )
    for part in ("optimize", "stream"):
        for name, c in (doc.get(part) or {}).get("checksums", {}).items():
            state = {True: "ok", False: "MISMATCH", None: "-"}[c["agrees"]]
            print(
                f"  checksum {name}: {state}"
                + ("" if c["agrees"] is not False else f"\n    got {c['got']}\n    expected {c['expected']}")
            )
    for part, results in (
        ("optimize", [(doc.get("optimize") or {}).get("arctic")]),
        ("stream", list(((doc.get("stream") or {}).get("runs") or {}).values())),
    ):
        for result in results:
            for error in (result or {}).get("errors", []):
                print(
                    f"!! {part}: {result.get('system')} failed at {error['step']}: "
                    f"{error['error'].strip().splitlines()[-1]}"
                )


def plot(doc: dict, path: str) -> None:
    stream = doc.get("stream")
    if not stream:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, result in stream["runs"].items():
        points = result.get("stream_r1") or []
        if points:
            ax.plot(
                [c for c, _ in points],
                [s for _, s in points],
                marker=".",
                linewidth=1,
                label=f"{label} the optimizer service",
            )
    ends = stream["runs"]["with"].get("commit_end") or []
    for ended_at, _mode, _bytes in (stream["runs"]["with"].get("optimizing") or {}).get(
        "optimize_ended_at", []
    ):
        done = sum(e <= ended_at for e in ends)  # commits finished when this optimize committed
        if 0 < done <= len(ends):
            ax.axvline(done, color="tab:green", alpha=0.25, linewidth=1)
    p = stream["parameters"]
    ax.set(
        xlabel="commit",
        ylabel="R1 query latency, s",
        title=f"query latency across a {p['commits']}-commit upsert stream ({p['initial_rows']:,} rows)\n"
        "green lines: an optimizing process committed",
    )
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    save_figure(fig, doc, path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    started = time.time()
    parts = args.parts.split(",")
    doc = {
        "benchmark": "optimizing",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "versions": versions(),
        "source": source_tree(),
        "loadavg_before": os.getloadavg(),
    }
    if "optimize" in parts:
        doc["optimize"] = part_optimize(args)
    if "stream" in parts:
        doc["stream"] = part_stream(args)
    doc["loadavg_after"] = os.getloadavg()
    doc["total_wall_s"] = time.time() - started
    plot(doc, os.path.splitext(args.out)[0] + ".png")
    report(doc)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, default=str)
    print(
        f"results: {os.path.relpath(args.out)}"
        + (f", plot: {os.path.relpath(doc['plot'])}" if "plot" in doc else "")
        + f"  ({doc['total_wall_s']:.0f} s)"
    )
    mismatch = [n for part in parts for n, c in doc[part]["checksums"].items() if c["agrees"] is False]
    return 1 if mismatch else 0


if __name__ == "__main__":
    sys.exit(main())
