#!/usr/bin/env bash
# Set up and run the whole test suite (unit, parser, end-to-end on local Spark, notebooks).
# Usage: bash scripts/test.sh [--fast] [pytest options...]
#   --fast  only tests/unit and tests/parser: no Spark, seconds (the edit-test loop). CI runs everything.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
targets=(tests)
# Two pytest workers, each with its own local SparkSession, a file at a time: much of an end-to-end
# test is waiting (JVMs starting, subprocess drivers, servers), which the other worker fills.
parallel=(-n 2 --dist loadfile)
if [ "${1:-}" = "--fast" ]; then
  shift
  targets=(tests/unit tests/parser)
  parallel=()
fi
bash "$here/scripts/setup.sh" test
cd "$here"
export SPARK_LOCAL_IP=127.0.0.1
# Import arctic_sql as installed, never from the source folder in the working directory: the
# source tree keeps parser/ and procedures/ beside arctic_sql/, installed inside it (package-dir).
export PYTHONSAFEPATH=1
# The suite's Spark drivers (its own sessions and the CLI, Thrift, notebook and crash-test drivers it
# starts, about sixty JVMs) live seconds to minutes on small data: C2's compile threads and the
# parallel GC's cost them CPU they rarely win back. C1 only and the serial GC: the whole suite took
# 18:12 instead of 23:34, fresh clones run back to back on the quiet 2-core machine. Users' Spark
# keeps the JVM's defaults; only the suite sets this.
export SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:-} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
pytest=("$here/.venv/bin/python" -m pytest -q -p no:cacheprovider --durations=40)
if [ "${#parallel[@]}" -eq 0 ]; then
  exec "${pytest[@]}" "${targets[@]}" "$@"
fi
# The suite's drivers map Spark's classes from a class-data-sharing archive made once per virtual
# environment (scripts/spark_cds.py: about a minute the first time; each driver then starts and runs
# its first statements about 12 s sooner here).
export SPARK_SUBMIT_OPTS="$SPARK_SUBMIT_OPTS $("$here/.venv/bin/python" "$here/scripts/spark_cds.py")"
"${pytest[@]}" "${parallel[@]}" -m "not busy_host" "${targets[@]}" "$@"
# The busy-host tests load both cores on purpose: they run alone, after the rest, so that no other
# test shares their load (exit code 5: the paths given hold none of them).
"${pytest[@]}" -m busy_host "${targets[@]}" "$@" || [ $? -eq 5 ]
