"""Writing branches: CREATE BRANCH, DROP BRANCH and fast-forward (reading/branches.py describes them).

Each is one ref commit per store, through pyiceberg's public ``manage_snapshots()``. The change
store goes first on create and last on drop, so the base store's ref (what makes the branch exist)
is written last and removed first. A branch takes the tags' write lease and waits for a running
expiration, as a tag does (reading/tags.py): an expiration never removes the snapshots a branch is
being made from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.table.refs import MAIN_BRANCH

from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError
from arctic_sql.faults import fault_point
from arctic_sql.table.format import versions
from arctic_sql.table.reading import branches, tags
from arctic_sql.table.reading.time_travel import checked_version
from arctic_sql.table.records import leases
from arctic_sql.table.writing import commit
from arctic_sql.table.writing.tag_writes import wait_for_expiration

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from arctic_sql.table.model.table import ArcticTable


def create(
    table: ArcticTable, name: str, version: int | None = None, *, if_not_exists: bool = False
) -> branches.Branch | None:
    """Branch ``table`` at ``version`` of main (default: main's head). Returns the branch made, None
    when IF NOT EXISTS found one of that name."""
    key = checked_name(table, name)
    with leases.writing(table, tags.TAGGING):
        wait_for_expiration(table, f"Branch '{key}' of {table.identifier}")
        _refresh(table)
        existing = branches.find(table, key)
        if existing is not None:
            if if_not_exists:
                return None
            raise InvalidArgumentError(f"Branch '{key}' of {table.identifier} already exists")
        if tags.find(table, key) is not None:
            raise InvalidArgumentError(f"'{key}' is a tag of {table.identifier}: a branch needs another name")
        for store in (table.base, table.change):
            if store is not None:
                commit.first_snapshot(table, store)
        base_id, change_id = _snapshots_at(table, version)
        if table.change is not None:
            assert change_id is not None
            _set_ref(table, table.change, key, change_id)
        _set_ref(table, table.base, key, base_id)
        return branches.Branch(key, base_id, change_id)


def drop(table: ArcticTable, name: str, *, if_exists: bool = False) -> bool:
    """Drop branch ``name`` (its ref in each store; the snapshots only it kept go with the next
    expiration); whether there was one."""
    key = checked_name(table, name)
    _refresh(table)
    if branches.find(table, key) is None:
        if if_exists:
            return False
        raise VersionNotFoundError(f"Branch '{key}' of {table.identifier} does not exist")
    for store in (table.base, table.change):
        if store is not None and key in store.metadata.refs:
            commit.set_refs(table, store, lambda ms: ms.remove_branch(key))
    return True


@dataclass(frozen=True)
class FastForwardResult:
    """A row of ``CALL system.fast_forward``: the ref moved and the versions it read before and after."""

    branch_updated: str
    previous_version: int
    updated_version: int


def fast_forward(table: ArcticTable, branch: str, to: str) -> FastForwardResult:
    """Move ``branch`` (``main`` or a branch) to the head of branch ``to`` in both stores, when
    ``branch``'s head is an ancestor of ``to``'s in each (nothing to merge). The base store moves
    first: a reader between the two commits reads ``branch`` as it was (its versions come from its
    change line, and each version's base snapshot from those the line knows), and running the
    fast-forward again after a crash there completes it. Known gap: a write to ``branch`` made
    before that rerun commits on the moved base, reading part of ``to`` (its optimized base without
    its newer changes), and the rerun is then refused; an intent record that the next commit
    completes or rolls back would close it."""
    _refresh(table)
    source, target = branch.lower(), to.lower()
    if source == target:
        raise InvalidArgumentError(f"fast_forward of {table.identifier}: branch and to are both '{source}'")
    moved, ahead = branches.on_branch(table, source), branches.on_branch(table, target)
    before = versions.history(moved.base, moved.change).latest
    after = versions.history(ahead.base, ahead.change).latest
    pairs = [(table.base, moved.base, ahead.base)]
    if table.change is not None:
        assert moved.change is not None and ahead.change is not None
        pairs.insert(0, (table.change, moved.change, ahead.change))
    for _, old, new in pairs:
        if not _is_ancestor(old, new):
            raise InvalidArgumentError(
                f"Cannot fast-forward '{source}' of {table.identifier} to '{target}': '{source}' has "
                f"commits '{target}' does not (version {before}); nothing was changed"
            )
    for store, old, new in sorted(pairs, key=lambda p: p[0] is not table.base):  # base store first
        head = new.current_snapshot()
        if head is not None and head.snapshot_id != _head_id(old):
            commit.set_refs(table, store, lambda ms, h=head.snapshot_id: _move(ms, source, h))
        if store is table.base:
            # A crash here leaves the moved base with the older change line; main still reads as it
            # was, and the next fast_forward (the base's move then a no-op) completes it.
            fault_point("fast-forward-between-stores")
    return FastForwardResult(source, before, after)


def checked_name(table: ArcticTable, name: str) -> str:
    if not tags.NAME.fullmatch(name) or name.lower() == MAIN_BRANCH:
        raise InvalidArgumentError(
            f"'{name}' is not a branch name of {table.identifier}: letters, digits and underscores, "
            f"not starting with a digit, and not '{MAIN_BRANCH}'"
        )
    return name.lower()


def _refresh(table: ArcticTable) -> None:
    table.base.refresh()
    if table.change is not None:
        table.change.refresh()


def _snapshots_at(table: ArcticTable, version: int | None) -> tuple[int, int | None]:
    """The base and change snapshots main's ``version`` reads (its head when None)."""
    history = versions.history(table.base, table.change)
    if table.base.current_snapshot() is None or (
        table.change is not None and table.change.current_snapshot() is None
    ):
        raise VersionNotFoundError(f"{table.identifier} has no snapshot to branch from yet")
    if version is None or (history.commits and version == history.latest):
        change = table.change.current_snapshot() if table.change is not None else None
        base = table.base.current_snapshot()
    else:
        checked_version(table, history, version)
        if table.change is None:
            base, change = versions.snapshot_at(table.base, version), None
        else:
            base, change = (
                versions.base_snapshot_for(table.base, version),
                versions.snapshot_at(table.change, version),
            )
            if change is None:
                raise VersionNotFoundError(f"Version {version} of {table.identifier} has no change snapshot")
    if base is None:
        raise VersionNotFoundError(
            f"Version {version} of {table.identifier} has no base snapshot to branch from"
        )
    return base.snapshot_id, change.snapshot_id if change is not None else None


def _head_id(store: Table) -> int | None:
    head = store.current_snapshot()
    return head.snapshot_id if head is not None else None


def _is_ancestor(old: Table, new: Table) -> bool:
    """Whether ``old``'s head is ``new``'s head or one of its ancestors (both views of one store)."""
    wanted = _head_id(old)
    return wanted is None or any(s.snapshot_id == wanted for s in versions.snapshots_in_order(new))


def _set_ref(table: ArcticTable, store: Table, name: str, snapshot_id: int) -> None:
    if name in store.metadata.refs:  # a change-store ref a crashed CREATE or DROP left: no branch
        commit.set_refs(table, store, lambda ms: ms.remove_branch(name))
    commit.set_refs(table, store, lambda ms: ms.create_branch(snapshot_id, name))


def _move(manage, branch: str, snapshot_id: int):  # noqa: ANN001, ANN202 - pyiceberg's ManageSnapshots
    if branch == MAIN_BRANCH:
        return manage.set_current_snapshot(snapshot_id=snapshot_id)
    return manage.create_branch(snapshot_id, branch)  # asserts the ref's current head: a move
