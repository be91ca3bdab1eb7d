"""``python -m arctic_sql.demo``, the command docs/deployment.md gives; the demo itself lives in
:mod:`arctic_sql.frontends.demo`."""

from __future__ import annotations

# Kept at the package root only so the documented `python -m arctic_sql.demo` still runs.
from arctic_sql.frontends.demo import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
