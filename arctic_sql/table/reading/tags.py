"""Tags: names for versions (``ALTER TABLE t CREATE TAG q3 AS OF VERSION 7 RETAIN 90 DAYS``).

A tag names one version of the table, the pair of store snapshots that version reads, and keeps it
readable: expiration keeps every version from the oldest live tag on (``oldest_needed``), as it
does for a stream consumer, until the tag is dropped or its retention ends. That is more than
Iceberg keeps (only the tagged snapshot): a version's rows live in two stores whose snapshots
follow each other, and expiration removes a prefix of versions, never a gap.

Each tag is one reserved property of the base store, ``arctic.tag.<name>`` (users cannot set
``arctic.*`` keys), written in one metadata commit: two writers creating different tags never
overwrite each other, and the tag travels with the table's metadata. This module reads tags; making
and dropping them is writing/tag_writes.py's.

A tag and an expiration never cross. pyiceberg applies an expiration's snapshot removal to the
catalog's newest metadata with no requirement a property commit could fail, so an expiration
planned before a tag was written would remove the tagged version anyway. Both take a write lease
first and then look for the other's (leases are read after they are written, on every supported
store): a tag waits for a running expiration to end and checks its version after it; an
expiration that finds a tag being made keeps every version this run (table/maintenance/expiration.py).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arctic_sql.errors import VersionNotFoundError
from arctic_sql.table.format import layout
from arctic_sql.table.records import leases

if TYPE_CHECKING:
    from arctic_sql.table.model.table import ArcticTable

PREFIX = "arctic.tag."
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
MAIN = "main"  # the table's own line of history, as Iceberg names it: never a tag
TAGGING = "tag"  # the operation of a tag's write lease, which expiration looks for
EXPIRING = "expire"  # the operation of an expiration's lease, which a tag waits for


@dataclass(frozen=True)
class Tag:
    name: str
    version: int
    created_at_ms: int
    retain_until_ms: int | None  # None: until dropped

    def live(self, now_ms: int) -> bool:
        return self.retain_until_ms is None or now_ms < self.retain_until_ms

    def value(self) -> str:
        return json.dumps(
            {
                "version": self.version,
                "created-at-ms": self.created_at_ms,
                "retain-until-ms": self.retain_until_ms,
            },
            sort_keys=True,
        )

    @classmethod
    def of(cls, name: str, value: str) -> Tag:
        fields = json.loads(value)
        return cls(name, int(fields["version"]), int(fields["created-at-ms"]), fields.get("retain-until-ms"))


def now_ms() -> int:
    return int(time.time() * 1000)


def tags(table: ArcticTable) -> list[Tag]:
    """Every tag of ``table``, live or past its retention, by name."""
    found = [Tag.of(k[len(PREFIX) :], v) for k, v in table.base.properties.items() if k.startswith(PREFIX)]
    return sorted(found, key=lambda t: t.name)


def find(table: ArcticTable, name: str) -> Tag | None:
    value = table.base.properties.get(PREFIX + name.lower())
    return Tag.of(name.lower(), value) if value is not None else None


def version_of(table: ArcticTable, name: str) -> int:
    """The version tag ``name`` names, or VersionNotFoundError naming the tags there are."""
    tag = find(table, name)
    if tag is None or not tag.live(now_ms()):
        known = ", ".join(t.name for t in tags(table) if t.live(now_ms())) or "none"
        state = "has passed its retention" if tag is not None else "does not exist"
        raise VersionNotFoundError(
            f"Tag '{name}' of {table.identifier} {state} (tags: {known}; see {table.identifier}.refs)"
        )
    return tag.version


def oldest_needed(table: ArcticTable, at_ms: int | None = None) -> int | None:
    """The oldest version a live tag names (expiration keeps it and every version after it)."""
    at_ms = now_ms() if at_ms is None else at_ms
    return min((t.version for t in tags(table) if t.live(at_ms)), default=None)


def being_created(table: ArcticTable) -> bool:
    """Whether a tag of ``table`` is being created now (a live tag lease): an expiration keeps every
    version then, since the tag may name any of them."""
    return leases.running(layout.table_root(table.base.location()), TAGGING)
