"""Writing and finishing a fast-forward's intent (records/fast_forwards.py says what it is).

:func:`write` records the intent in the change store; :func:`finish` then moves the base store's
ref and the change store's, and clears the intent with the change store's move, each step one
commit that asserts the ref it moves. ``finish`` is what the fast-forward itself runs, and what the
commit loop (writing/commit.py) runs before any commit on a branch with a pending intent: a
fast-forward that died between the two stores is completed (rolled forward: the intent is the
decision), whoever gets there first. Two processes finishing at once race on those assertions: the
loser reloads and finds the step done. Only when completing is impossible (a target snapshot is
gone, or a ref moved that the intent does not know) is it rolled back: the base store's ref goes
back to where it was and the intent is cleared.

Every commit is sent with the catalog's ``commit_table`` as explicit updates and requirements:
pyiceberg's ``Transaction`` keeps one requirement of each type, and these commits assert two refs.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.update import (
    AssertRefSnapshotId,
    RemovePropertiesUpdate,
    RemoveSnapshotRefUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
)

from arctic_sql.errors import CommitConflictError
from arctic_sql.faults import fault_point
from arctic_sql.table.format import versions
from arctic_sql.table.reading.branches import head_of
from arctic_sql.table.records import fast_forwards
from arctic_sql.table.records.fast_forwards import Intent

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from arctic_sql.table.model.table import ArcticTable

log = logging.getLogger(__name__)

_ATTEMPTS = 20


def guard(branch: str | None) -> AssertRefSnapshotId:
    """The requirement a change-store commit on ``branch`` carries: no intent of ``branch`` pending."""
    return AssertRefSnapshotId(ref=fast_forwards.key(branch), snapshot_id=None)


def write(name: str, change: Table, intent: Intent) -> None:
    """Record ``intent`` in ``change`` (the change store as the fast-forward checked it): one
    commit that asserts the branch's change head is still ``change_from`` and that no intent is
    pending. CommitConflictError when either no longer holds: nothing was changed."""
    key = fast_forwards.key(intent.branch)
    try:
        change.catalog.commit_table(
            change,
            (
                AssertRefSnapshotId(ref=intent.branch, snapshot_id=intent.change_from),
                AssertRefSnapshotId(ref=key, snapshot_id=None),
            ),
            (
                _set_ref(key, SnapshotRefType.TAG, intent.change_to),
                SetPropertiesUpdate(updates={key: intent.value()}),
            ),
        )
    except CommitFailedException as e:
        raise CommitConflictError(
            f"Fast-forward of '{intent.branch}' of {name} conflicted with another commit; try again"
        ) from e


def settle(table: ArcticTable, *, fresh: Table | None = None) -> bool:
    """Finish the pending fast-forward of ``table``'s branch, if any; whether there was one.

    ``fresh``: the store the caller loaded just now (the commit loop's); the change store is reloaded
    unless it is that one. The commit loop loads a base store before this looks for an intent, so a
    base-store commit that found none asserts a base head from before any intent's move, and the
    catalog refuses it if one moved."""
    change = table.change
    if change is None:
        return False
    if fresh is not change:
        change.refresh()
    branch = table.identifier.branch or MAIN_BRANCH
    if fast_forwards.pending(change, branch) is None:
        return False
    finish(str(table.identifier), table.base, change, branch)
    return True


def finish(name: str, base: Table, change: Table, branch: str) -> bool:
    """Complete (or, when that is impossible, undo) ``branch``'s pending intent; False when it was
    undone. ``base`` and ``change`` are the table's stores, or a branch's view of them (whose ref
    ``branch`` is its own)."""
    seen = None
    for attempt in range(_ATTEMPTS):
        change.refresh()
        intent = fast_forwards.pending(change, branch)
        if intent is None:  # nothing pending, or another process ended it: which way?
            if seen is None:
                return True
            base.refresh()
            return _reaches(change, branch, seen.change_to) and _reaches(base, branch, seen.base_to)
        seen = intent
        base.refresh()
        base_head, change_head = head_of(base, branch), head_of(change, branch)
        try:
            if base_head == intent.base_to and change_head in (intent.change_from, intent.change_to):
                _clear(change, intent, move=change_head != intent.change_to)
                return True
            if base_head != intent.base_from or change_head != intent.change_from:
                _undo(name, base, change, intent, "a ref moved that it does not know")
                return False
            if not _has(base, intent.base_to) or not _has(change, intent.change_to):
                _undo(name, base, change, intent, "a snapshot it moves to is gone")
                return False
            _move(base, branch, intent.base_from, intent.base_to)
            # A crash here leaves the base moved and the change store not: the intent is still
            # pending, readers read the branch as before it (reading/branches.py), and the next
            # commit or fast-forward on the branch completes it.
            fault_point("fast-forward-between-stores")
        except CommitFailedException:  # another process took the step: reload and look again
            time.sleep(min(0.02 * 2**attempt, 1.0) * (1 + random.random()))
    raise CommitConflictError(f"Could not finish the fast-forward of '{branch}' of {name}; try again")


def _reaches(store: Table, branch: str, snapshot_id: int) -> bool:
    """Whether ``snapshot_id`` is ``branch``'s head in ``store`` or one of its ancestors."""
    return any(s.snapshot_id == snapshot_id for s in versions.ancestry(store, head_of(store, branch)))


def _has(store: Table, snapshot_id: int) -> bool:
    return store.metadata.snapshot_by_id(snapshot_id) is not None


def _move(store: Table, branch: str, old: int, new: int) -> None:
    store.catalog.commit_table(
        store,
        (AssertRefSnapshotId(ref=branch, snapshot_id=old),),
        (_set_ref(branch, SnapshotRefType.BRANCH, new),),
    )


def _clear(change: Table, intent: Intent, *, move: bool) -> None:
    """The change store's step, which ends the intent: its ref moved (when ``move``) and the intent
    removed, in one commit."""
    key = fast_forwards.key(intent.branch)
    requirements = [AssertRefSnapshotId(ref=key, snapshot_id=intent.change_to)]
    updates: list = [RemoveSnapshotRefUpdate(ref_name=key), RemovePropertiesUpdate(removals=[key])]
    if move:
        requirements.append(AssertRefSnapshotId(ref=intent.branch, snapshot_id=intent.change_from))
        updates.insert(
            0,
            _set_ref(intent.branch, SnapshotRefType.BRANCH, intent.change_to),
        )
    change.catalog.commit_table(change, tuple(requirements), tuple(updates))


def _undo(name: str, base: Table, change: Table, intent: Intent, why: str) -> None:
    """Roll the intent back: the base store's ref back to ``base_from`` if it moved, then the intent
    cleared. Only for an intent that cannot be completed (``why``); the branch reads as before it."""
    log.warning("rolling back the fast-forward of '%s' of %s: %s", intent.branch, name, why)
    if head_of(base, intent.branch) == intent.base_to and _has(base, intent.base_from):
        _move(base, intent.branch, intent.base_to, intent.base_from)
    key = fast_forwards.key(intent.branch)
    change.catalog.commit_table(
        change,
        (AssertRefSnapshotId(ref=key, snapshot_id=intent.change_to),),
        (RemoveSnapshotRefUpdate(ref_name=key), RemovePropertiesUpdate(removals=[key])),
    )


def _set_ref(name: str, kind: SnapshotRefType, snapshot_id: int) -> SetSnapshotRefUpdate:
    """pyiceberg's ref update. Its retention fields are optional but aliased (``max-ref-age-ms``),
    which the pydantic plugin for mypy takes for required arguments."""
    return SetSnapshotRefUpdate(ref_name=name, type=kind, snapshot_id=snapshot_id)  # type: ignore[call-arg]
