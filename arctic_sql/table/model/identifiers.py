"""How a table is named: its identifier, and the names and property keys of its two stores.

Plain values, so that naming a table (a statement, a stream, the service) imports nothing that
reads or writes one. A primary-key table ``db.t`` is the base store ``db.t`` and the change store
``db.t__change``; a CTAS stages its base store as ``db.t__creating`` until its rows are committed.
"""

from __future__ import annotations

from dataclasses import dataclass

from arctic_sql.errors import InvalidArgumentError

CHANGE_SUFFIX = "__change"
STAGED_SUFFIX = "__creating"  # the base store of a CTAS until its rows are committed
FORMAT_KEY = "arctic.format"
PRIMARY_KEY_KEY = "arctic.primary-key"
STORE_KEY = "arctic.store"
# On the change store of a table being purged: the base store's metadata file (the purge's journal).
PURGING_KEY = "arctic.purging-base"
RESERVED_COLUMN_PREFIX = "arctic_"
# On a shallow clone's base store: its claim on its sources' files (records/clones.py), as JSON.
CLONE_OF_KEY = "arctic.clone-of"
# On the base store: field ids of key columns widened from int to bigint, which keep hashing as an
# int where their values fit in one (format/keyhash.py), so rows written before stay in their nodes.
KEY_AS_INT_KEY = "arctic.key.hashed-as-int"
# ``db.t.branch_audit``: table ``db.t`` read and written at its branch ``audit`` (Iceberg's spelling).
BRANCH_PREFIX = "branch_"


@dataclass(frozen=True)
class TableIdentifier:
    database: str
    name: str
    branch: str | None = None  # None: main

    @classmethod
    def parse(cls, text: str, default_database: str) -> TableIdentifier:
        parts = [p.strip("`") for p in text.split(".")]
        if (
            parts
            and parts[0].lower() in ("spark_catalog", "arctic")
            and (len(parts) == 4 or (len(parts) == 3 and not _is_branch(parts[2])))
        ):
            parts = parts[1:]
        if len(parts) == 3 and _is_branch(parts[2]):
            return cls(parts[0].lower(), parts[1].lower(), parts[2][len(BRANCH_PREFIX) :].lower())
        if len(parts) == 1:
            return cls(default_database.lower(), parts[0].lower())
        if len(parts) == 2:
            return cls(parts[0].lower(), parts[1].lower())
        raise InvalidArgumentError(f"Invalid table name '{text}': expected db.table")

    def __str__(self) -> str:
        table = f"{self.database}.{self.name}"
        return table if self.branch is None else f"{table}.{BRANCH_PREFIX}{self.branch}"

    def on_branch(self, branch: str | None) -> TableIdentifier:
        """This table at ``branch`` (None: main)."""
        return TableIdentifier(self.database, self.name, branch)

    @property
    def base_id(self) -> tuple[str, str]:
        return (self.database, self.name)

    @property
    def change_id(self) -> tuple[str, str]:
        return (self.database, self.name + CHANGE_SUFFIX)

    @property
    def staged_id(self) -> tuple[str, str]:
        return (self.database, self.name + STAGED_SUFFIX)


def _is_branch(part: str) -> bool:
    return part.lower().startswith(BRANCH_PREFIX) and len(part) > len(BRANCH_PREFIX)


def whole_table(identifier: TableIdentifier, what: str) -> None:
    """Refuse a branch's name (``db.t.branch_b``) where only a whole table makes sense: dropping,
    creating, renaming or altering it would act on every branch, not on the one named."""
    if identifier.branch is not None:
        raise InvalidArgumentError(
            f"{what} takes a table, not a branch: {identifier} is branch '{identifier.branch}' of "
            f"{identifier.on_branch(None)} (ALTER TABLE {identifier.on_branch(None)} DROP BRANCH "
            f"{identifier.branch} drops it)"
        )
