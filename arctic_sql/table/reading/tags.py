"""Tags: names for versions (``ALTER TABLE t CREATE TAG q3 AS OF VERSION 7 RETAIN 90 DAYS``).

A tag names one version of the table, the pair of store snapshots that version reads, and keeps it
readable: expiration keeps every version from the oldest live tag on (``oldest_needed``), as it
does for a stream consumer, until the tag is dropped or its retention ends. That is more than
Iceberg keeps (only the tagged snapshot): a version's rows live in two stores whose snapshots
follow each other, and expiration removes a prefix of versions, never a gap.

Each tag is one reserved property of the base store, ``arctic.tag.<name>`` (users cannot set
``arctic.*`` keys), written in one metadata commit: two writers creating different tags never
overwrite each other, and the tag travels with the table's metadata.

A tag and an expiration never cross. pyiceberg applies an expiration's snapshot removal to the
catalog's newest metadata with no requirement a property commit could fail, so an expiration
planned before a tag was written would remove the tagged version anyway. Both take a write lease
first and then look for the other's (leases are read after they are written, on every supported
store): a tag waits for a running expiration to end and checks its version after it; an
expiration that finds a tag being made keeps every version this run (table/maintenance/retention.py).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arctic_sql.errors import CommitConflictError, InvalidArgumentError, VersionNotFoundError
from arctic_sql.table.records import leases
from arctic_sql.table.writing import commit
from arctic_sql.table.format import layout
from arctic_sql.table.format import versions
from arctic_sql.table.reading.time_travel import checked_version

if TYPE_CHECKING:
    from arctic_sql.table.model.table import ArcticTable

PREFIX = "arctic.tag."
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
MAIN = "main"  # the table's own line of history, as Iceberg names it: never a tag
UNIT_MS = {"days": 86_400_000, "hours": 3_600_000, "minutes": 60_000}
TAGGING = "tag"  # the operation of a tag's write lease, which expiration looks for
EXPIRING = "expire"  # the operation of an expiration's lease, which a tag waits for
WAIT_FOR_EXPIRATION_S = 120.0  # how long a tag waits for a running expiration before it gives up


@dataclass(frozen=True)
class Tag:
    name: str
    version: int
    created_at_ms: int
    retain_until_ms: int | None  # None: until dropped

    def live(self, now_ms: int) -> bool:
        return self.retain_until_ms is None or now_ms < self.retain_until_ms

    def value(self) -> str:
        return json.dumps({"version": self.version, "created-at-ms": self.created_at_ms,
                           "retain-until-ms": self.retain_until_ms}, sort_keys=True)

    @classmethod
    def of(cls, name: str, value: str) -> Tag:
        fields = json.loads(value)
        return cls(name, int(fields["version"]), int(fields["created-at-ms"]), fields.get("retain-until-ms"))


def now_ms() -> int:
    return int(time.time() * 1000)


def tags(table: ArcticTable) -> list[Tag]:
    """Every tag of ``table``, live or past its retention, by name."""
    found = [Tag.of(k[len(PREFIX):], v) for k, v in table.base.properties.items() if k.startswith(PREFIX)]
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
        raise VersionNotFoundError(f"Tag '{name}' of {table.identifier} {state} (tags: {known}; "
                                   f"see {table.identifier}.refs)")
    return tag.version


def oldest_needed(table: ArcticTable, at_ms: int | None = None) -> int | None:
    """The oldest version a live tag names (expiration keeps it and every version after it)."""
    at_ms = now_ms() if at_ms is None else at_ms
    return min((t.version for t in tags(table) if t.live(at_ms)), default=None)


def create(table: ArcticTable, name: str, version: int | None = None, retain_ms: int | None = None, *,
           replace: bool = False, create: bool = True, if_not_exists: bool = False) -> Tag | None:
    """Name ``version`` (default: the newest) ``name``. ``create``/``replace``: whether a new tag
    may be made / an existing one moved (CREATE: create only; REPLACE: replace only; CREATE OR
    REPLACE: both). Returns the tag written, None when IF NOT EXISTS found one."""
    key = _checked_name(name)
    if retain_ms is not None and retain_ms <= 0:
        raise InvalidArgumentError(f"Tag '{name}' of {table.identifier}: RETAIN must be positive")
    with leases.writing(table, TAGGING):
        _wait_for_expiration(table, key)
        return _create(table, key, version, retain_ms, replace=replace, create=create, if_not_exists=if_not_exists)


def _create(table: ArcticTable, key: str, version: int | None, retain_ms: int | None, *, replace: bool,
            create: bool, if_not_exists: bool) -> Tag | None:
    table.base.refresh()
    if table.change is not None:  # an expiration may have just ended: check the version on what it left
        table.change.refresh()
    existing = find(table, key)
    if existing is not None and not replace:
        if if_not_exists:
            return None
        raise InvalidArgumentError(f"Tag '{key}' of {table.identifier} already exists (version {existing.version}); "
                                   "REPLACE TAG moves it")
    if existing is None and not create:
        raise VersionNotFoundError(f"Tag '{key}' of {table.identifier} does not exist; CREATE TAG makes it")
    history = versions.history(table.base, table.change)
    if version is None:
        if not history.commits:
            raise VersionNotFoundError(f"{table.identifier} has no version to tag yet")
        version = history.latest
    elif version == 0:
        raise VersionNotFoundError(f"Version 0 of {table.identifier} is the empty table before any commit: "
                                   "there is nothing to tag")
    checked_version(table, history, version)
    created = now_ms()
    tag = Tag(key, version, created, created + retain_ms if retain_ms is not None else None)
    commit.set_properties(table.base, {PREFIX + key: tag.value()})
    return tag


def _wait_for_expiration(table: ArcticTable, key: str) -> None:
    """Return once no expiration of ``table`` runs (this tag's lease is already written, so one that
    starts from now on sees it), or CommitConflictError after :data:`WAIT_FOR_EXPIRATION_S`."""
    root = layout.table_root(table.base.location())
    deadline = time.monotonic() + WAIT_FOR_EXPIRATION_S
    while any(lease.operation == EXPIRING for lease in leases.live_leases(root)):
        if time.monotonic() >= deadline:
            raise CommitConflictError(f"Tag '{key}' of {table.identifier}: an expiration of the table has run for "
                                      f"over {WAIT_FOR_EXPIRATION_S:.0f} s; create the tag when it ends")
        time.sleep(0.2)


def being_created(table: ArcticTable) -> bool:
    """Whether a tag of ``table`` is being created now (a live tag lease): an expiration keeps every
    version then, since the tag may name any of them."""
    root = layout.table_root(table.base.location())
    return any(lease.operation == TAGGING for lease in leases.live_leases(root))


def drop(table: ArcticTable, name: str, *, if_exists: bool = False) -> bool:
    """Drop tag ``name``; whether there was one (a missing one is an error unless ``if_exists``)."""
    key = _checked_name(name)
    table.base.refresh()
    if find(table, key) is None:
        if if_exists:
            return False
        raise VersionNotFoundError(f"Tag '{key}' of {table.identifier} does not exist")
    commit.set_properties(table.base, removals=[PREFIX + key])
    return True


def drop_past_retention(table: ArcticTable, at_ms: int) -> list[str]:
    """Drop the tags whose retention ended before ``at_ms`` (as Iceberg's expiration drops old refs)."""
    gone = [t.name for t in tags(table) if not t.live(at_ms)]
    if gone:
        commit.set_properties(table.base, removals=[PREFIX + n for n in gone])
    return gone


def _checked_name(name: str) -> str:
    if not NAME.fullmatch(name) or name.lower() == MAIN:
        raise InvalidArgumentError(f"'{name}' is not a tag name: letters, digits and underscores, not starting "
                                   f"with a digit, and not '{MAIN}'")
    return name.lower()
