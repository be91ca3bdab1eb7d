#!/usr/bin/env bash
# Set up arctic-sql on a fresh machine: a JDK for Spark, a virtual environment, the package.
# Usage: source scripts/setup.sh [extras]   (extras default to "test")
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${1:-test}"

python_bin="${PYTHON:-}"
if [ -z "$python_bin" ]; then
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then python_bin="$candidate"; break; fi
  done
fi
if [ -z "$python_bin" ] || ! "$python_bin" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "arctic-sql needs Python 3.11 or newer; none found on PATH" >&2
  exit 1
fi

# Spark 4 needs Java 17 or newer: for the driver JVM pyspark starts, and for the master, workers and
# executors of a standalone cluster (bin/spark-class; tests/e2e/test_cluster.py), which need nothing more.
java_major() {  # 17 for "17.0.15", 8 for "1.8.0_292"; 0 without java
  java -version 2>&1 | sed -n 's/.*version "\([0-9]*\)\.*\([0-9]*\).*/\1 \2/p' | head -1 |
    awk '{ print ($1 == 1) ? $2 : $1 }' | grep . || echo 0
}
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "No Java 17+ found: installing OpenJDK 17 (headless) for Spark..."
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  fi
  if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
    echo "Spark needs a Java runtime 17 or newer (JDK 17 or 21) first on PATH; found: $(java -version 2>&1 | head -1)" >&2
    echo "Install one (e.g. 'sudo apt-get install openjdk-17-jre-headless' or 'brew install openjdk@17') and re-run." >&2
    exit 1
  fi
fi

# The dashboard's browser test (tests/e2e/test_service_dashboard.py) drives Debian's Chromium through
# Playwright; Playwright's own browser download is never used. Installed only for the test extra, only
# where apt-get can, and only when missing (the test skips, saying why, where it cannot be had).
case ",$extras," in
  *,test,*)
    if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
      echo "No Chromium found: installing Debian's chromium for the dashboard's browser test..."
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } ||
        echo "Could not install chromium: the dashboard's browser test will be skipped" >&2
    fi
    # The cluster test keeps its catalog in a real PostgreSQL (tests/e2e/pg_harness.py): Debian's
    # server binaries live in /usr/lib/postgresql/<version>/bin, off PATH. Same rules as Chromium.
    if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 &&
       [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
      echo "No PostgreSQL found: installing Debian's postgresql for the cluster test's catalog..."
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } ||
        echo "Could not install postgresql: the cluster test will be skipped" >&2
    fi
    ;;
esac

if [ ! -x "$here/.venv/bin/python" ]; then
  "$python_bin" -m venv "$here/.venv"
fi
"$here/.venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
"$here/.venv/bin/python" -m pip install -q "$here[$extras]"
# Spark's Python workers import pyspark from its pyspark.zip, which holds only sources; the runners of
# Python streaming sources and sinks must connect back within a fixed 10 s, too short for compiling
# pyspark on a busy host. Add compiled modules to the zips (docs/production.md; idempotent).
"$here/.venv/bin/python" -m arctic_sql.worker_zips >/dev/null
# The JVM artifacts the tests use (scripts/jars.lock): Iceberg's Spark runtime with the pyspark it is built
# for (tests/e2e/test_iceberg_interop.py), Spark's Kafka connector and a Kafka broker (test_kafka_cdc.py).
case ",$extras," in
  *,test,*) bash "$here/scripts/jars.sh" iceberg venv-spark4.1 kafka broker ;;
esac
echo "arctic-sql installed in $here/.venv (Python: $("$here/.venv/bin/python" --version), Java: $(java -version 2>&1 | head -1))"
