"""Writing tags: CREATE, REPLACE and DROP TAG, and the drop of tags past their retention.

Each is one property commit of the base store (reading/tags.py describes tags and reads them). A
tag takes a write lease first and waits for a running expiration to end, so that the two never
cross (reading/tags.py).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from arctic_sql.errors import CommitConflictError, InvalidArgumentError, VersionNotFoundError
from arctic_sql.table.format import layout, versions
from arctic_sql.table.reading import branches, pairs
from arctic_sql.table.reading.tags import EXPIRING, MAIN, NAME, PREFIX, TAGGING, Tag, find, now_ms, tags
from arctic_sql.table.reading.time_travel import checked_version
from arctic_sql.table.records import leases
from arctic_sql.table.writing import commit

if TYPE_CHECKING:
    from arctic_sql.table.model.table import ArcticTable

UNIT_MS = {"days": 86_400_000, "hours": 3_600_000, "minutes": 60_000}
WAIT_FOR_EXPIRATION_S = 120.0  # how long a tag waits for a running expiration before it gives up


def create(
    table: ArcticTable,
    name: str,
    version: int | None = None,
    retain_ms: int | None = None,
    *,
    replace: bool = False,
    create: bool = True,
    if_not_exists: bool = False,
) -> Tag | None:
    """Name ``version`` (default: the newest) ``name``. ``create``/``replace``: whether a new tag
    may be made / an existing one moved (CREATE: create only; REPLACE: replace only; CREATE OR
    REPLACE: both). Returns the tag written, None when IF NOT EXISTS found one."""
    key = _checked_name(name)
    if retain_ms is not None and retain_ms <= 0:
        raise InvalidArgumentError(f"Tag '{name}' of {table.identifier}: RETAIN must be positive")
    with leases.writing(table, TAGGING):
        wait_for_expiration(table, f"Tag '{key}' of {table.identifier}")
        return _create(
            table, key, version, retain_ms, replace=replace, create=create, if_not_exists=if_not_exists
        )


def _create(
    table: ArcticTable,
    key: str,
    version: int | None,
    retain_ms: int | None,
    *,
    replace: bool,
    create: bool,
    if_not_exists: bool,
) -> Tag | None:
    pairs.reload(table)  # an expiration may have just ended: check the version on what it left
    if branches.find(table, key) is not None:
        raise InvalidArgumentError(f"'{key}' is a branch of {table.identifier}: a tag needs another name")
    existing = find(table, key)
    if existing is not None and not replace:
        if if_not_exists:
            return None
        raise InvalidArgumentError(
            f"Tag '{key}' of {table.identifier} already exists (version {existing.version}); "
            "REPLACE TAG moves it"
        )
    if existing is None and not create:
        raise VersionNotFoundError(f"Tag '{key}' of {table.identifier} does not exist; CREATE TAG makes it")
    history = versions.history(table.base, table.change)
    if version is None:
        if not history.commits:
            raise VersionNotFoundError(f"{table.identifier} has no version to tag yet")
        version = history.latest
    elif version == 0:
        raise VersionNotFoundError(
            f"Version 0 of {table.identifier} is the empty table before any commit: there is nothing to tag"
        )
    checked_version(table, history, version)
    created = now_ms()
    tag = Tag(key, version, created, created + retain_ms if retain_ms is not None else None)
    commit.set_properties(table.base, {PREFIX + key: tag.value()})
    return tag


def wait_for_expiration(table: ArcticTable, what: str) -> None:
    """Return once no expiration of ``table`` runs (the caller's lease, a tag's or a clone's, is
    already written, so one that starts from now on sees it), or CommitConflictError after
    :data:`WAIT_FOR_EXPIRATION_S`."""
    root = layout.table_root(table.base.location())
    deadline = time.monotonic() + WAIT_FOR_EXPIRATION_S
    while leases.running(root, EXPIRING):
        if time.monotonic() >= deadline:
            raise CommitConflictError(
                f"{what}: an expiration of the table has run for "
                f"over {WAIT_FOR_EXPIRATION_S:.0f} s; try again when it ends"
            )
        time.sleep(0.2)


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
        raise InvalidArgumentError(
            f"'{name}' is not a tag name: letters, digits and underscores, not starting "
            f"with a digit, and not '{MAIN}'"
        )
    return name.lower()
