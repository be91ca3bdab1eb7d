"""A table's two stores read as one pair the table had: the one rule every reader loads them by.

A primary-key table is read from a pair (base store, change store), two catalog calls apart. Some
commits move the base store and then the change store (a fast-forward: the base ref, then the change
ref; an INSERT OVERWRITE's base commit and the changes after it), and such a sequence can land whole
between the two loads: the old base with the new change line is a pair no committed state had (a
fast-forward of ``main`` to a branch with an INSERT OVERWRITE would read main's old rows with the
branch's changes). So a load is base, change, then the base again (:func:`confirm`): when the base
store did not move (the same metadata file: every commit writes a new one), the pair is what the
catalog held when the change store was loaded; when it moved, both are loaded again. Writers leave
every state between their commits readable (they are crash safe), so a pair held at one moment is a
consistent one once seen as readers see it (:func:`as_read`: a pending fast-forward's moved base at
its head from before). This covers every ref at once: it is one metadata file per store.

Code that holds a table and reloads it (the optimizer's planning, a statement run again, a clone
or a branch made from it) calls :func:`reload`, never ``refresh()`` on one store: that would pair
the store it reloads with the other as it was.
"""

from __future__ import annotations

from collections.abc import Callable

from pyiceberg.table import Table
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType

from arctic_sql.errors import CommitConflictError
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading.branches import head_of
from arctic_sql.table.records import fast_forwards

# Loads of the pair before giving up: the base store would have to move on every one (each a few
# milliseconds), which no table's commits do for long.
ATTEMPTS = 20


def reload(table: ArcticTable) -> ArcticTable:
    """Reload ``table``'s stores in place as a pair the table had, as readers see it (:func:`as_read`);
    returns ``table``. A branch's view reloads the branch."""
    table.base.refresh()
    if table.change is not None:
        table.change.refresh()
    return confirm(table)


def confirm(table: ArcticTable, follow: Callable[[Table, Table], None] | None = None) -> ArcticTable:
    """``table``, whose change store was loaded after its base store, made a pair the table had (in
    place, see the module's doc) and seen as readers see it; returns ``table``. ``follow(base,
    change)`` runs on each change store loaded, before the base store is looked at again (the
    catalog brings the change store's schema into line with the base store's there)."""
    change = table.change
    if change is None:
        return table
    for _ in range(ATTEMPTS):
        if follow is not None:
            follow(table.base, change)
        location = table.base.metadata_location
        table.base.refresh()
        if table.base.metadata_location == location:
            return as_read(table)
        change.refresh()  # the base moved meanwhile: the change store loaded before may be older
    raise CommitConflictError(
        f"Could not read {table.identifier}: its base store moved on each of {ATTEMPTS} loads; try again"
    )


def as_read(table: ArcticTable) -> ArcticTable:
    """``table`` as its readers see it (in place; returns ``table``): the base store's ref of each
    branch with a pending fast-forward that has moved only the base store (records/fast_forwards.py)
    at the head it had before, so that the pair read is the one before the fast-forward, not the
    moved base with the older change line (which would show, say, an INSERT OVERWRITE of the other
    branch without the changes before it). Every branch's at once, so that a branch's view made from
    ``table`` later (reading/branches.on_branch) reads its own line as before too. Any commit reloads
    its store and finishes the fast-forward first (writing/commit.py)."""
    change = table.change
    if change is None:
        return table
    base = table.base
    viewed = table.identifier.branch or MAIN_BRANCH
    refs = dict(base.metadata.refs)
    current, pinned = base.metadata.current_snapshot_id, False
    for key in change.properties:
        if not key.startswith(fast_forwards.PREFIX):
            continue
        branch = key[len(fast_forwards.PREFIX) :]
        if branch == MAIN_BRANCH and viewed != MAIN_BRANCH:
            continue  # a branch's view names its own branch ``main``: the table's is not in it
        intent = fast_forwards.pending(change, branch)
        if (
            intent is None
            or intent.base_from == intent.base_to
            or head_of(base, branch) != intent.base_to
            or head_of(change, branch) != intent.change_from
            or base.snapshot_by_id(intent.base_from) is None
        ):
            continue  # nothing moved, or the change store moved too: the pair is as it is
        ref = SnapshotRef(  # type: ignore[call-arg]  # optional aliased retention fields (pydantic plugin)
            snapshot_id=intent.base_from, snapshot_ref_type=SnapshotRefType.BRANCH
        )
        refs[branch], pinned = ref, True
        if branch == viewed:  # a branch's view names its branch ``main`` too (reading/branches.py)
            refs[MAIN_BRANCH], current = ref, intent.base_from
    if pinned:
        # The catalog still holds the moved ref: a commit sent from this metadata is refused, and its
        # retry reloads and finishes the fast-forward (writing/commit.py).
        base.metadata = base.metadata.model_copy(update={"current_snapshot_id": current, "refs": refs})
    return table
