#!/usr/bin/env bash
# Fetch the pinned JVM artifacts of scripts/jars.lock from Maven Central into jars/<group>/.
# Usage: bash scripts/jars.sh GROUP...   (e.g. iceberg kafka broker; "all" for every served group;
#        no argument lists the groups). Idempotent: a group whose jars are all present is skipped.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python_bin="${PYTHON:-}"
if [ -z "$python_bin" ]; then
  for candidate in "$here/.venv/bin/python" python3 python; do
    if command -v "$candidate" >/dev/null 2>&1; then python_bin="$candidate"; break; fi
  done
fi
exec "$python_bin" "$here/scripts/jars.py" "$@"
