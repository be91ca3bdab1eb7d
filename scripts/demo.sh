#!/usr/bin/env bash
# Set up and run the demo on the embedded default: local Spark, ./warehouse, SQLite catalog inside it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$here/scripts/setup.sh" test
cd "$here"
export SPARK_LOCAL_IP=127.0.0.1
exec "$here/.venv/bin/python" -m arctic_sql.demo "$@"
