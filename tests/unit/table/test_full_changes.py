"""The full change feed's per-version logic (table/reading/full_changes.py), on Arrow tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.reading import node_merge
from arctic_sql.table.reading.full_changes import checked_mode, diff, per_version

TARGET = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _changes(rows: list[tuple[int, str | None, int, bool]]) -> pa.Table:
    """Change rows (id, value, version, is_delete), tagged as the change store tags them."""
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "v": pa.array([r[1] for r in rows], pa.string()),
            node_merge.TAG: pa.array([node_merge.tag(r[2], r[3]) for r in rows], pa.int64()),
        }
    )


def _feed(before: list[tuple[int, str]], rows: list[tuple[int, str | None, int, bool]]) -> list[tuple]:
    old = pa.table({"id": [b[0] for b in before], "v": [b[1] for b in before]}, schema=TARGET)
    found, kinds, versions = diff(old, per_version(_changes(rows), ["id"]), ["id"], TARGET)
    return list(
        zip(found.column("id").to_pylist(), found.column("v").to_pylist(), kinds, versions, strict=True)
    )


def test_each_version_of_a_key_gives_delta_rows_with_the_previous_state_as_pre_image() -> None:
    rows = [
        (1, "a", 3, False),
        (1, "b", 4, False),
        (1, None, 5, True),
        (1, "c", 6, False),
        (2, "x2", 4, False),
    ]
    assert _feed([(2, "x")], rows) == [
        (1, "a", "insert", 3),
        (1, "a", "update_preimage", 4),
        (1, "b", "update_postimage", 4),
        (1, "b", "delete", 5),
        (1, "c", "insert", 6),
        (2, "x", "update_preimage", 4),
        (2, "x2", "update_postimage", 4),
    ]


def test_a_delete_carries_the_deleted_row_and_a_delete_of_an_absent_key_gives_nothing() -> None:
    assert _feed([(7, "seven")], [(7, None, 2, True), (8, None, 2, True), (7, None, 3, True)]) == [
        (7, "seven", "delete", 2)
    ]


def test_one_version_shows_one_change_per_key_and_its_delete_wins() -> None:
    # Written twice in version 2 (two files), then upserted and deleted in version 3.
    rows = [(1, "a", 2, False), (1, "b", 2, False), (1, "c", 3, False), (1, None, 3, True)]
    assert [r[2:] for r in _feed([], rows)] == [("insert", 2), ("delete", 3)]


def test_a_composite_key_compares_every_key_column() -> None:
    target = pa.schema([("a", pa.int64()), ("b", pa.string()), ("v", pa.int64())])
    old = pa.table({"a": [1], "b": ["x"], "v": [10]}, schema=target)
    changes = pa.table(
        {"a": [1, 1], "b": ["x", "y"], "v": [11, 12], node_merge.TAG: [node_merge.tag(5, False)] * 2},
    )
    _, kinds, _ = diff(old, per_version(changes, ["a", "b"]), ["a", "b"], target)
    assert sorted(kinds) == ["insert", "update_postimage", "update_preimage"]


def test_an_unknown_mode_is_refused_in_one_line() -> None:
    assert checked_mode(" FULL ", "changeFeedMode") == "full"
    with pytest.raises(InvalidArgumentError, match="changeFeedMode must be latest or full, got 'all'"):
        checked_mode("all", "changeFeedMode")
