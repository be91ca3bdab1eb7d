#!/usr/bin/env bash
# Set up and run the demo on the embedded default: local Spark, ./warehouse, SQLite catalog inside it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$here/scripts/setup.sh" test
cd "$here"
export SPARK_LOCAL_IP=127.0.0.1
# Import arctic_sql as installed, never from the source folder in the working directory: the
# source tree keeps parser/ and procedures/ beside arctic_sql/, installed inside it (package-dir).
export PYTHONSAFEPATH=1
exec "$here/.venv/bin/python" -m arctic_sql.frontends.demo "$@"
