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

from arctic_sql.errors import CommitConflictError, InvalidArgumentError, VersionNotFoundError
from arctic_sql.table.format import versions
from arctic_sql.table.reading import branches, pairs, tags
from arctic_sql.table.reading.time_travel import checked_version
from arctic_sql.table.records import fast_forwards, leases
from arctic_sql.table.writing import commit, fast_forward_intents
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
    if fast_forward_intents.settle(branches.on_branch(table, key)):  # its intent goes with it
        _refresh(table)
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
    ``branch``'s head is an ancestor of ``to``'s in each (nothing to merge); nothing to do when
    ``to``'s heads are already in ``branch`` (its versions before and after are then the same).

    Two commits, base store first, so on a keyed table the move is first written down as an intent
    in the change store (records/fast_forwards.py), and then carried out by
    fast_forward_intents.finish. A fast-forward that dies between the two stores is completed by
    the next commit on ``branch`` (the commit loop finishes a pending intent before anything else,
    and no change commit on ``branch`` lands while one is pending) or by the next fast-forward,
    which then finds nothing left to move; until then ``branch`` reads as it was."""
    _refresh(table)
    source, target = branch.lower(), to.lower()
    if source == target:
        raise InvalidArgumentError(f"fast_forward of {table.identifier}: branch and to are both '{source}'")
    moved, ahead = branches.on_branch(table, source), branches.on_branch(table, target)
    for view in (moved, ahead):  # a fast-forward of either that died half-way: finish it first
        if fast_forward_intents.settle(view):
            _refresh(table)
            moved, ahead = branches.on_branch(table, source), branches.on_branch(table, target)
    before = versions.history(moved.base, moved.change).latest
    after = versions.history(ahead.base, ahead.change).latest
    pairs = [(table.base, moved.base, ahead.base)]
    if table.change is not None:
        assert moved.change is not None and ahead.change is not None
        pairs.insert(0, (table.change, moved.change, ahead.change))
    if all(_is_ancestor(new, old) for _, old, new in pairs):  # ``to`` is already in ``branch``
        return FastForwardResult(source, before, before)
    for _, old, new in pairs:
        if not _is_ancestor(old, new):
            raise InvalidArgumentError(
                f"Cannot fast-forward '{source}' of {table.identifier} to '{target}': '{source}' has "
                f"commits '{target}' does not (version {before}); nothing was changed"
            )
    if table.change is None:  # one store, one commit
        head = ahead.base.current_snapshot()
        if head is not None and head.snapshot_id != _head_id(moved.base):
            head_id = head.snapshot_id
            commit.set_refs(table, table.base, lambda ms: _move(ms, source, head_id))
        return FastForwardResult(source, before, after)
    assert moved.change is not None and ahead.change is not None
    ids = [_head_id(s) for s in (moved.base, ahead.base, moved.change, ahead.change)]
    assert all(i is not None for i in ids)  # CREATE BRANCH gave both stores a snapshot
    intent = fast_forwards.Intent(source, target, *ids)  # type: ignore[arg-type]
    fast_forward_intents.write(str(table.identifier), table.change, intent)
    if not fast_forward_intents.finish(str(table.identifier), table.base, table.change, source):
        raise CommitConflictError(
            f"Fast-forward of '{source}' of {table.identifier} conflicted with a commit on '{source}'; "
            "nothing was changed: try again"
        )
    return FastForwardResult(source, before, after)


def checked_name(table: ArcticTable, name: str) -> str:
    if not tags.NAME.fullmatch(name) or name.lower() == MAIN_BRANCH:
        raise InvalidArgumentError(
            f"'{name}' is not a branch name of {table.identifier}: letters, digits and underscores, "
            f"not starting with a digit, and not '{MAIN_BRANCH}'"
        )
    return name.lower()


def _refresh(table: ArcticTable) -> None:
    pairs.reload(table)


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
