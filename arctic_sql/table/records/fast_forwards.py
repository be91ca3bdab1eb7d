"""The intent of a fast-forward: what ``fast_forward`` of a branch is about to move, in both stores.

A fast-forward moves a branch's ref in the base store and then in the change store: two Iceberg
commits. Before the first it writes its intent into the change store's metadata, in one commit:

- the property ``arctic.fast-forward.<branch>``: the four snapshot ids (each store's head before
  and after), so that whoever finds the intent can finish the move;
- an Iceberg tag of the same name on the change store's target snapshot. It keeps that snapshot from
  expiration while the intent is pending, and it is what every change-store commit on the branch
  asserts is absent (``AssertRefSnapshotId(ref, None)``, checked by the catalog in the same
  compare-and-swap as the commit): no change commit lands on the branch while its intent is pending.

The intent is the decision: once written, the fast-forward is done by whoever gets there first (the
fast-forward itself, the next commit on the branch, the next fast-forward), each step a commit that
asserts the ref it moves (writing/fast_forward_intents.py). This module only reads and spells it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from pyiceberg.table.refs import MAIN_BRANCH

if TYPE_CHECKING:
    from pyiceberg.table import Table

PREFIX = "arctic.fast-forward."  # no branch or tag name has a dot: the ref is never a user's


@dataclass(frozen=True)
class Intent:
    """A pending fast-forward of ``branch`` to ``to``: each store's head before and after."""

    branch: str
    to: str
    base_from: int
    base_to: int
    change_from: int
    change_to: int

    def value(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def key(branch: str | None) -> str:
    """The property key, and the change store's tag, of ``branch``'s intent (None: main)."""
    return f"{PREFIX}{branch or MAIN_BRANCH}"


def pending(change: Table, branch: str | None) -> Intent | None:
    """``branch``'s pending intent in ``change`` (its change store), if any."""
    raw = change.properties.get(key(branch))
    if raw is None:
        return None
    fields = json.loads(raw)
    return Intent(**{k: fields[k] for k in Intent.__dataclass_fields__})


def is_intent_ref(name: str) -> bool:
    return name.startswith(PREFIX)
