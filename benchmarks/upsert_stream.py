"""The upsert-stream benchmark: figures W1, W2 and R1 (README.md here), arctic-sql beside its peers.

    python -m benchmarks.upsert_stream --scale 1            # W1, R1, checksums: arctic-sql, delta-rs, pyiceberg
    python -m benchmarks.upsert_stream --scale 0.02 --commits 5   # a quick run
    python -m benchmarks.upsert_stream --w2 --scale 0.1     # W2: arctic-sql at scale 0.1 and 1.0

The data (an initial load and C batches) is generated once per (scale, commits, seed) under the work
directory. By default (``--w1-mode interleaved``) every system runs in one subprocess
(``benchmarks/systems/interleaved.py``) that commits each batch with all of them back to back, in a
rotating order, so the machine's load hits them alike; ``--w1-mode separate`` runs each system in its
own subprocess (``benchmarks/systems/<name>.py``), one after another. Every system writes a result
file after every step. The orchestrator judges systems by those files, never by exit
codes, kills a system at ``--peer-timeout`` and reports what it finished. It prints a table, writes
``benchmarks/results/upsert_stream.json`` (``upsert_stream_w2.json`` for ``--w2``) and, if
matplotlib is installed, a PNG of the per-commit latencies. The exit code is 1 when a system's final
table disagrees with the reference model (a correctness bug), else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from importlib import metadata

from benchmarks import datagen

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
SYSTEMS = {"arctic": "arctic-sql", "delta": "delta-rs", "iceberg": "pyiceberg"}
# Share of --peer-timeout after which a system starts no further commit (the rest is for R1 and checksums).
COMMIT_BUDGET = 0.8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.upsert_stream",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--scale", type=float, default=1.0, help="N0 = 2,000,000 x scale rows (default 1)")
    parser.add_argument("--commits", type=int, default=20, help="number of commits C (default 20)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--work", default=os.path.join(RESULTS, "work"), help="data and table directory")
    parser.add_argument(
        "--out", default=None, help="result JSON (default benchmarks/results/upsert_stream.json)"
    )
    parser.add_argument(
        "--peer-timeout",
        type=float,
        default=900.0,
        help="seconds one system's whole run may take before it is killed (default 900)",
    )
    parser.add_argument(
        "--systems", default="arctic,delta,iceberg", help="comma-separated subset of arctic,delta,iceberg"
    )
    parser.add_argument(
        "--w1-mode",
        choices=("interleaved", "separate"),
        default="interleaved",
        help="W1/R1: all systems in one process, commit by commit (interleaved, default), or one "
        "process per system, one after the other (separate)",
    )
    parser.add_argument(
        "--w2", action="store_true", help="W2 mode: run arctic-sql only, at --scale and at 10 x --scale"
    )
    parser.add_argument(
        "--w2-batch",
        choices=("fixed", "proportional"),
        default="fixed",
        help="W2: the large scale keeps the small scale's batch size (fixed, default) or "
        "uses 1%% of its own table (proportional)",
    )
    parser.add_argument(
        "--w2-mode",
        choices=("interleaved", "separate"),
        default="interleaved",
        help="W2: both tables in one arctic-sql process, each commit on both back to back "
        "(interleaved, default), or one process per scale, one after the other (separate)",
    )
    parser.add_argument("--keep-tables", action="store_true", help="keep the systems' tables after the run")
    args = parser.parse_args(argv)
    unknown = set(args.systems.split(",")) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
    if args.out is None:
        args.out = os.path.join(RESULTS, "upsert_stream_w2.json" if args.w2 else "upsert_stream.json")
    return args


# running one system -----------------------------------------------------------------------------
def run_system(name: str, data: str, run_dir: str, timeout: float, extra: list[str] | None = None) -> dict:
    """Run ``benchmarks.systems.<name>`` on ``data`` in a fresh ``run_dir``; return its result file."""
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    out = os.path.join(run_dir, "result.json")
    log_path = os.path.join(run_dir, "output.log")
    start = time.time()
    command = [
        sys.executable,
        "-m",
        f"benchmarks.systems.{name}",
        "--data",
        data,
        "--work",
        run_dir,
        "--out",
        out,
        "--deadline",
        str(start + COMMIT_BUDGET * timeout),
        *(extra or []),
    ]
    load_before = os.getloadavg()
    print(
        f"--- {SYSTEMS.get(name, name)} (timeout {timeout:.0f} s, log {os.path.relpath(log_path)})",
        flush=True,
    )
    repo = os.path.dirname(HERE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p)}
    with open(log_path, "w", encoding="utf-8") as log:
        # Own session: a timeout kills the system's whole process group (its JVM included), nothing else.
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log, text=True, cwd=repo, env=env, start_new_session=True
        )
        echo = threading.Thread(target=_echo, args=(process.stdout, log), daemon=True)
        echo.start()
        timed_out = False
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(process)
        echo.join(timeout=10)
    result = {"system": SYSTEMS.get(name, name), "status": "no result file", "commit_s": [], "errors": []}
    if os.path.exists(out):
        with open(out, encoding="utf-8") as f:
            result = json.load(f)
    if timed_out:
        result["status"] = "timed out"
        result["errors"].append(
            {"step": "orchestrator", "error": f"killed after --peer-timeout {timeout:.0f} s"}
        )
    elif result.get("status") == "running":
        result["status"] = "crashed"
    result["exit_code"] = process.returncode
    result["wall_s"] = time.time() - start
    result["loadavg_before"], result["loadavg_after"] = load_before, os.getloadavg()
    return result


def run_interleaved(names: list[str], data: str, run_dir: str, timeout: float) -> dict[str, dict]:
    """All of ``names`` in one process, commit by commit; each system's result as ``run_system`` gives it.
    The process may take ``timeout`` per system."""
    from benchmarks.systems.interleaved import result_path

    run = run_system("interleaved", data, run_dir, timeout * len(names), extra=["--systems", ",".join(names)])
    results = {}
    for name in names:
        path = result_path(os.path.join(run_dir, "result.json"), name)
        result = {"system": SYSTEMS[name], "status": "no result file", "commit_s": [], "errors": []}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                result = json.load(f)
        if result.get("status") == "running":
            result["status"] = run["status"] if run["status"] != "done" else "crashed"
        result["errors"] += [e for e in run.get("errors", []) if e.get("step") == "orchestrator"]
        for key in ("exit_code", "wall_s", "loadavg_before", "loadavg_after"):
            result[key] = run.get(key)
        results[name] = result
    return results


def _echo(stream, log) -> None:
    for line in stream:
        log.write(line)
        log.flush()
        print("   " + line, end="", flush=True)


def _kill_group(process: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=15)
            return
        except subprocess.TimeoutExpired:
            continue


# figures ----------------------------------------------------------------------------------------
def median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def check(result: dict, reference: list[dict], name: str = "checksum", commits: str = "commit_s") -> dict:
    """Compare a system's checksum with the reference model after the commits it finished."""
    done = len(result.get(commits, []))
    got = result.get(name)
    if got is None:
        return {"agrees": None, "after_commits": done, "why": "no checksum (the run did not get that far)"}
    expected = reference[done]
    return {"agrees": got == expected, "after_commits": done, "got": got, "expected": expected}


def plain_pyarrow_r1(path: str, runs: int = 3) -> list[float]:
    """The R1 aggregate over the plain Parquet dataset read by pyarrow (the baseline of the Arrow peers)."""
    import pyarrow.dataset as ds

    def once() -> None:
        table = ds.dataset(path, format="parquet").to_table(columns=["status", "amount"])
        table.group_by("status").aggregate([([], "count_all"), ("amount", "sum")])

    once()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    return times


def versions() -> dict:
    found = {}
    for package in ("arctic-sql", "pyspark", "deltalake", "pyiceberg", "pyarrow", "numpy"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


def source_tree() -> dict:
    """The commit of the arctic-sql tree the run used, and whether its code had uncommitted changes."""
    repo = os.path.dirname(HERE)

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(
                ["git", *args], cwd=repo, capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    dirty = git("status", "--porcelain", "--", "arctic_sql", "parser", "procedures")
    return {"commit": git("rev-parse", "HEAD"), "code_dirty": bool(dirty) if dirty is not None else None}


def machine() -> dict:
    return {
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }


def fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# the two modes ----------------------------------------------------------------------------------
def run_w1_r1(args: argparse.Namespace) -> tuple[dict, bool]:
    workload = datagen.Workload(args.scale, args.commits, args.seed)
    data = datagen.generate(workload, args.work)
    manifest = datagen.read_manifest(data)
    reference = manifest["reference_checksums"]
    names = args.systems.split(",")
    if args.w1_mode == "interleaved":
        results = run_interleaved(names, data, os.path.join(data, "runs", "interleaved"), args.peer_timeout)
    else:
        results = {
            name: run_system(name, data, os.path.join(data, "runs", name), args.peer_timeout)
            for name in names
        }

    arctic = results.get("arctic", {})
    w1 = {n: median(r.get("commit_s")) for n, r in results.items()}
    r1 = {n: median(r.get("r1_s")) for n, r in results.items()}
    plain_spark = median(arctic.get("plain_spark_r1_s"))
    plain_path = (arctic.get("plain_parquet") or {}).get("path")
    plain_arrow_runs = plain_pyarrow_r1(plain_path) if plain_path and os.path.exists(plain_path) else []
    plain_arrow = median(plain_arrow_runs)
    checks = {n: check(r, reference) for n, r in results.items()}
    if arctic.get("plain_checksum") is not None:
        checks["plain-parquet"] = check(arctic, reference, "plain_checksum")
    mismatch = [n for n, c in checks.items() if c["agrees"] is False]

    figures = {
        "W1_median_commit_s": w1,
        "W1_commits_done": {n: len(r.get("commit_s", [])) for n, r in results.items()},
        "W1_ratio_arctic_over_delta": ratio(w1.get("arctic"), w1.get("delta")),
        "W1_ratio_arctic_over_pyiceberg": ratio(w1.get("arctic"), w1.get("iceberg")),
        "R1_median_s": r1,
        "R1_baseline_plain_parquet_spark_s": plain_spark,
        "R1_baseline_plain_parquet_pyarrow_s": plain_arrow,
        "R1_ratio_over_plain_spark": {n: ratio(v, plain_spark) for n, v in r1.items()},
        "R1_ratio_over_plain_pyarrow": {n: ratio(v, plain_arrow) for n, v in r1.items()},
        "load_s": {n: r.get("load_s") for n, r in results.items()},
        "checksums_agree": not mismatch and all(c["agrees"] for c in checks.values()),
    }
    doc = {
        "benchmark": "upsert-stream",
        "mode": "W1+R1",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "versions": versions(),
        "source": source_tree(),
        "parameters": {
            "scale": args.scale,
            "commits": args.commits,
            "seed": args.seed,
            "w1_mode": args.w1_mode,
            "initial_rows": manifest["initial_rows"],
            "batch_rows": manifest["batch_rows"],
            "batch_mix": manifest["batch_mix"],
            "peer_timeout_s": args.peer_timeout,
        },
        "figures": figures,
        "checksums": checks,
        "plain_pyarrow_r1_s": plain_arrow_runs,
        "systems": results,
    }
    _print_w1_r1(doc)
    _plot(doc, os.path.splitext(args.out)[0] + ".png")
    if not args.keep_tables:
        shutil.rmtree(os.path.join(data, "runs"), ignore_errors=True)
    return doc, bool(mismatch)


def run_w2(args: argparse.Namespace) -> tuple[dict, bool]:
    scales = [args.scale, round(args.scale * 10, 6)]
    keys = [f"{scale:g}" for scale in scales]
    small = datagen.Workload(args.scale, args.commits, args.seed)
    large = datagen.Workload(
        scales[1],
        args.commits,
        args.seed,
        fixed_batch_rows=small.batch_rows if args.w2_batch == "fixed" else None,
    )
    data = {
        key: datagen.generate(workload, args.work) for key, workload in zip(keys, (small, large), strict=True)
    }
    references = {key: datagen.read_manifest(d)["reference_checksums"] for key, d in data.items()}
    rows = {
        key: {"initial_rows": w.initial_rows, "batch_rows": w.batch_rows}
        for key, w in zip(keys, (small, large), strict=True)
    }
    commit_times, checks, runs = {}, {}, {}
    if args.w2_mode == "interleaved":
        # One arctic-sql process, both tables, each commit on both back to back: one JVM, one machine load.
        run_dir = os.path.join(data[keys[0]], "runs", "arctic-w2")
        result = run_system(
            "arctic",
            data[keys[0]],
            run_dir,
            args.peer_timeout,
            extra=["--commits-only", "--data2", data[keys[1]]],
        )
        runs["interleaved"] = result
        commit_times = {keys[0]: result.get("commit_s", []), keys[1]: result.get("commit_s_large", [])}
        checks[keys[0]] = check(result, references[keys[0]])
        checks[keys[1]] = check(result, references[keys[1]], "checksum_large", "commit_s_large")
        loads = {keys[0]: result.get("load_s"), keys[1]: result.get("load_s_large")}
        if not args.keep_tables:
            shutil.rmtree(run_dir, ignore_errors=True)
    else:
        loads = {}
        for key in keys:
            run_dir = os.path.join(data[key], "runs", "arctic")
            result = run_system("arctic", data[key], run_dir, args.peer_timeout, extra=["--commits-only"])
            runs[key] = result
            commit_times[key] = result.get("commit_s", [])
            checks[key] = check(result, references[key])
            loads[key] = result.get("load_s")
            if not args.keep_tables:
                shutil.rmtree(run_dir, ignore_errors=True)
    w1 = {key: median(times) for key, times in commit_times.items()}
    mismatch = [k for k, c in checks.items() if c["agrees"] is False]
    doc = {
        "benchmark": "upsert-stream",
        "mode": "W2",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "versions": versions(),
        "source": source_tree(),
        "parameters": {
            "scales": scales,
            "commits": args.commits,
            "seed": args.seed,
            "w2_batch": args.w2_batch,
            "w2_mode": args.w2_mode,
            "rows": rows,
            "peer_timeout_s": args.peer_timeout,
        },
        "figures": {
            "W1_median_commit_s": w1,
            "W2": ratio(w1[keys[1]], w1[keys[0]]),
            "load_s": loads,
            "checksums_agree": not mismatch and all(c["agrees"] for c in checks.values()),
        },
        "commit_s": commit_times,
        "checksums": checks,
        "systems": runs,
    }
    print()
    print(
        f"W2 (arctic-sql): W1 at scale {keys[1]} / W1 at scale {keys[0]}, {args.w2_batch} batch size, "
        f"{args.w2_mode} runs"
    )
    for key in keys:
        print(
            f"  scale {key:>6} ({rows[key]['initial_rows']:,} rows, batches of {rows[key]['batch_rows']:,}): "
            f"W1 {fmt(w1[key])} s over {len(commit_times[key])} commits, load {fmt(loads[key], 1)} s"
        )
    meaning = (
        "1.0: commit cost follows the batch, not the table"
        if args.w2_batch == "fixed"
        else "batches grow 10x too: 10 means cost proportional to the batch"
    )
    print(f"  W2 = {fmt(doc['figures']['W2'], 2)}   ({meaning})")
    for key, result in runs.items():
        for error in result.get("errors", []):
            print(f"!! {key} failed at {error['step']}: {error['error'].strip().splitlines()[-1]}")
    _print_checks(checks)
    return doc, bool(mismatch)


# report -----------------------------------------------------------------------------------------
def _print_w1_r1(doc: dict) -> None:
    p, f, systems = doc["parameters"], doc["figures"], doc["systems"]
    print()
    print(
        f"upsert-stream: scale {p['scale']:g} ({p['initial_rows']:,} rows), {p['commits']} commits of "
        f"{p['batch_rows']:,} rows ({p['batch_mix']}), nproc {doc['machine']['nproc']}, "
        f"{p.get('w1_mode', 'separate')} runs"
    )
    print(
        f"{'system':<12} {'status':<10} {'load s':>8} {'W1 s':>8} {'commits':>8} {'R1 s':>8} "
        f"{'R1/spark':>9} {'R1/arrow':>9} {'checksum':>9}"
    )
    for name, result in systems.items():
        agrees = doc["checksums"][name]["agrees"]
        print(
            f"{result.get('system', name):<12} {result.get('status', '?'):<10} {fmt(result.get('load_s'), 2):>8} "
            f"{fmt(f['W1_median_commit_s'][name]):>8} {f['W1_commits_done'][name]:>3}/{p['commits']:<4} "
            f"{fmt(f['R1_median_s'][name]):>8} {fmt(f['R1_ratio_over_plain_spark'][name], 2):>9} "
            f"{fmt(f['R1_ratio_over_plain_pyarrow'][name], 2):>9} "
            f"{ {True: 'ok', False: 'MISMATCH', None: '-'}[agrees]:>9}"
        )
    print(
        f"{'plain parquet':<12} {'(Spark)':<10} {'':>8} {'':>8} {'':>8} "
        f"{fmt(f['R1_baseline_plain_parquet_spark_s']):>8} {'1.00':>9}"
    )
    print(
        f"{'plain parquet':<12} {'(pyarrow)':<10} {'':>8} {'':>8} {'':>8} "
        f"{fmt(f['R1_baseline_plain_parquet_pyarrow_s']):>8} {'':>9} {'1.00':>9}"
    )
    print()
    print(f"W1 arctic/delta-rs  = {fmt(f['W1_ratio_arctic_over_delta'], 2)}")
    print(
        f"W1 arctic/pyiceberg = {fmt(f['W1_ratio_arctic_over_pyiceberg'], 2)}"
        "   (pyiceberg: upsert + delete = two Iceberg commits, timed together as one)"
    )
    for name, result in systems.items():
        for error in result.get("errors", []):
            last = error["error"].strip().splitlines()[-1]
            print(f"!! {result.get('system', name)} failed at {error['step']}: {last}")
            if error.get("statement"):
                print(f"   statement: {error['statement']}")
    _print_checks(doc["checksums"])


def _print_checks(checks: dict) -> None:
    bad = {n: c for n, c in checks.items() if c["agrees"] is False}
    if not bad:
        agreed = [n for n, c in checks.items() if c["agrees"]]
        print(
            f"checksums agree with the reference model: {', '.join(agreed) or 'none'}"
            + (
                ""
                if len(agreed) == len(checks)
                else f"; no checksum from {', '.join(n for n in checks if n not in agreed)}"
            )
        )
        return
    print("!" * 78)
    for name, c in bad.items():
        print(f"!! CHECKSUM MISMATCH: {name} after {c['after_commits']} commits")
        print(f"!!   got      {json.dumps(c['got'], sort_keys=True)}")
        print(f"!!   expected {json.dumps(c['expected'], sort_keys=True)}")
    print("!" * 78)


def _plot(doc: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for result in doc["systems"].values():
        times = result.get("commit_s") or []
        if times:
            ax.plot(range(1, len(times) + 1), times, marker="o", label=result.get("system"))
    p = doc["parameters"]
    ax.set(
        xlabel="commit",
        ylabel="seconds",
        yscale="log",
        title=f"upsert-stream commit latency, scale {p['scale']:g} ({p['initial_rows']:,} rows)",
    )
    ax.grid(True, which="both", alpha=0.3)
    save_figure(fig, doc, path)


def save_figure(fig, doc: dict, path: str) -> None:
    """Write ``fig`` (legend on every axis) as a PNG at ``path`` and record it in ``doc``."""
    import matplotlib.pyplot as plt

    for ax in fig.axes:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    doc["plot"] = path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    started = time.time()
    doc, mismatch = run_w2(args) if args.w2 else run_w1_r1(args)
    doc["total_wall_s"] = time.time() - started
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, default=str)
    print(
        f"results: {os.path.relpath(args.out)}"
        + (f", plot: {os.path.relpath(doc['plot'])}" if "plot" in doc else "")
        + f"  ({doc['total_wall_s']:.0f} s)"
    )
    return 1 if mismatch else 0


if __name__ == "__main__":
    sys.exit(main())
