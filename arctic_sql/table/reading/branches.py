"""Branches: lines of history beside ``main`` (``ALTER TABLE t CREATE BRANCH audit``).

A branch of a primary-key table is a consistent pair: an Iceberg branch ref of the same name in
each store, the base store's and the change store's, made from the two snapshots one version of
``main`` reads. A table has the branch when its base store has the ref (the base store is the
table's commit point, as for DDL: writing/branch_writes.py makes the change store's ref first and
drops it last, so a crash leaves at worst a change-store ref without a base one, which is no branch
and is replaced by the next CREATE BRANCH of that name).

Reading and writing a branch reuse every path that reads and writes ``main``: :func:`on_branch`
returns the table as seen from the branch, each store a pyiceberg ``Table`` whose metadata names the
branch's head as current (and as ``main``), with a catalog that turns the ``main`` ref of every
commit sent through it into the branch's. So a version read on it is a version of the branch (its
own ancestry, in both stores), and an INSERT, UPDATE, DELETE or MERGE commits to the branch's refs
with the same checks as on ``main``: a commit asserts the branch's head, never main's. Sequence
numbers stay the store's own, so a version number names one commit on whichever line holds it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.update import AssertRefSnapshotId, SetSnapshotRefUpdate

from arctic_sql.errors import VersionNotFoundError
from arctic_sql.table.format import versions
from arctic_sql.table.model.table import ArcticTable

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata


@dataclass(frozen=True)
class Branch:
    name: str
    base_snapshot_id: int
    change_snapshot_id: int | None  # None on a table without a key


def _branch_refs(store: Table) -> dict[str, int]:
    return {
        name: ref.snapshot_id
        for name, ref in store.metadata.refs.items()
        if ref.snapshot_ref_type == SnapshotRefType.BRANCH and name != MAIN_BRANCH
    }


def branches(table: ArcticTable) -> list[Branch]:
    """The table's branches but ``main``, by name (those whose base store has the ref)."""
    change_refs = _branch_refs(table.change) if table.change is not None else {}
    found = []
    for name, base_id in sorted(_branch_refs(table.base).items()):
        if table.change is not None and name not in change_refs:
            continue  # a base ref alone is never written (branch_writes makes the change ref first)
        found.append(Branch(name, base_id, change_refs.get(name)))
    return found


def find(table: ArcticTable, name: str) -> Branch | None:
    return next((b for b in branches(table) if b.name == name.lower()), None)


def head_version(table: ArcticTable, name: str) -> int:
    """The newest version branch ``name`` reads (0 when it holds no data commit)."""
    view = on_branch(table, name)
    return versions.history(view.base, view.change).latest


def on_branch(table: ArcticTable, name: str) -> ArcticTable:
    """``table`` as seen from branch ``name`` (``main``: the table itself); VersionNotFoundError
    naming the branches there are when it has none of that name."""
    name = name.lower()
    if name == MAIN_BRANCH:
        return table
    if find(table, name) is None:
        known = ", ".join(b.name for b in branches(table)) or "none"
        raise VersionNotFoundError(
            f"Branch '{name}' of {table.identifier.on_branch(None)} does not exist "
            f"(branches: {known}; see {table.identifier.on_branch(None)}.refs)"
        )
    change = _BranchStore.of(table.change, name) if table.change is not None else None
    return ArcticTable(table.identifier.on_branch(name), _BranchStore.of(table.base, name), change)


def head_of(store: Table, branch: str) -> int | None:
    """The snapshot ``branch``'s ref of ``store`` points at, or None."""
    ref = store.metadata.refs.get(branch)
    return ref.snapshot_id if ref is not None else None


class _BranchStore(Table):
    """A store read and written at one branch: its ``main`` is the branch (see the module's doc)."""

    @classmethod
    def of(cls, store: Table, branch: str) -> _BranchStore:
        catalog = _BranchCatalog(store.catalog, branch)
        return cls(
            store.name(),
            catalog.project(store.metadata),
            store.metadata_location,
            store.io,
            catalog,  # type: ignore[arg-type]  # stands in for the Catalog, with the calls a Table makes
            store.config,
        )


class _BranchCatalog:
    """The store's catalog, with every ref ``main`` of a commit sent through it made ``branch``, and
    the metadata it returns seen from ``branch``. Everything else is the catalog's own."""

    def __init__(self, catalog: Any, branch: str) -> None:
        self._catalog = catalog
        self._branch = branch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._catalog, name)

    def project(self, metadata: TableMetadata) -> TableMetadata:
        return _projected(metadata, self._branch)

    def load_table(self, identifier: Any) -> Table:
        return _BranchStore.of(self._catalog.load_table(identifier), self._branch)

    def commit_table(self, table: Table, requirements: tuple, updates: tuple) -> CommitTableResponse:
        requirements = tuple(self._renamed(r) for r in requirements)
        updates = tuple(self._renamed(u) for u in updates)
        response = self._catalog.commit_table(table, requirements, updates)
        return CommitTableResponse(
            metadata=self.project(response.metadata), **{"metadata-location": response.metadata_location}
        )

    def _renamed(self, change: Any) -> Any:
        if isinstance(change, AssertRefSnapshotId) and change.ref == MAIN_BRANCH:
            return change.model_copy(update={"ref": self._branch})
        if isinstance(change, SetSnapshotRefUpdate) and change.ref_name == MAIN_BRANCH:
            return change.model_copy(update={"ref_name": self._branch})
        return change


# Projections by the identity of the metadata they came from (metadata is immutable, and loaded again
# unchanged it is the same object: files/metadata_cache.py), so that versions.history's cache, keyed
# the same way, serves a branch's reads as it serves main's.
_lock = threading.Lock()
_projections: OrderedDict[tuple[int, str], tuple[Any, Any]] = OrderedDict()
_KEPT = 32


def _projected(metadata: TableMetadata, branch: str) -> TableMetadata:
    key = (id(metadata), branch)
    with _lock:
        kept = _projections.get(key)
        if kept is not None and kept[0] is metadata:
            return kept[1]
    ref = metadata.refs.get(branch)
    if ref is None:
        raise VersionNotFoundError(f"Branch '{branch}' no longer exists")
    refs = {**metadata.refs, MAIN_BRANCH: ref}
    projected = metadata.model_copy(update={"current_snapshot_id": ref.snapshot_id, "refs": refs})
    with _lock:
        _projections[key] = (metadata, projected)
        while len(_projections) > _KEPT:
            _projections.popitem(last=False)
    return projected
