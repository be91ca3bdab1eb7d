"""Where the JVM artifacts that ``scripts/jars.sh`` fetched are, for sessions that put them on ``spark.jars``.

Nothing here downloads: a group that was not fetched is a one-line error naming the command that
fetches it. The jars live in ``jars/<group>/`` of the source checkout, or under ``$ARCTIC_SQL_JARS``.
"""

from __future__ import annotations

import os
from pathlib import Path

from arctic_sql.errors import ArcticError

FETCHED_MARKER = ".jars.lock"  # written by scripts/jars.py after a group's fetch completed


class MissingJarsError(ArcticError):
    """A group of JVM artifacts was not fetched."""


def jars_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding one sub-folder of jars per group: ``root``, ``$ARCTIC_SQL_JARS`` or ./jars."""
    return Path(root or os.environ.get("ARCTIC_SQL_JARS") or "jars").resolve()


def group_jars(group: str, root: str | os.PathLike[str] | None = None) -> list[str]:
    """The jar files of ``group`` (e.g. "iceberg", "kafka", "broker"), sorted; raises when not fetched."""
    folder = jars_root(root) / group
    jars = sorted(str(path) for path in folder.glob("*.jar"))
    if not jars or not (folder / FETCHED_MARKER).is_file():
        raise MissingJarsError(
            f"The '{group}' jars are not in {folder}: fetch them with 'bash scripts/jars.sh {group}'"
        )
    return jars


def spark_jars(*groups: str, root: str | os.PathLike[str] | None = None) -> str:
    """The ``spark.jars`` value for ``groups``: their jars, comma-separated."""
    return ",".join(jar for group in groups for jar in group_jars(group, root))
