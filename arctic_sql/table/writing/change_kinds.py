"""Rows a DataFrame or stream hands a table, in Arrow: kinds of change, sequences, one change per key.

A write's rows may carry ``_change_type`` (Delta's change-feed vocabulary): ``upsert``, ``insert``,
``update`` and ``update_postimage`` write the row, ``delete`` removes its key, ``update_preimage``
is ignored. Within one transaction a key appears at most once (DESIGN "Transactions and order"):
with a sequence column the newest change of a key wins, a tie or a NULL among its changes is an
error; without one, a second change of a key is an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arctic_sql.errors import InvalidArgumentError, PrimaryKeyViolationError
from arctic_sql.table.format import layout
from arctic_sql.table.writing.arrow_files import WriteTarget, conform, null_where

CHANGE_TYPE = "_change_type"
UPSERT_TYPES = frozenset({"upsert", "insert", "update", "update_postimage"})
DELETE_TYPES = frozenset({"delete"})
IGNORED_TYPES = frozenset({"update_preimage"})
CHANGE_TYPES = UPSERT_TYPES | DELETE_TYPES | IGNORED_TYPES
# How the duplicate-key error of a DataFrame or stream write says to resolve it.
SEQUENCE_HINT = "set option sequenceColumn to keep the newest"
# What a change feed adds beside ``_change_type`` (arctic's and Delta's names): a change stream written
# into another table keeps them out of its rows, so replicating a table needs no column juggling.
FEED_COLUMNS = frozenset({"_change_version", "_commit_version", "_commit_timestamp"})


@dataclass(frozen=True)
class Changes:
    """Rows in the table's columns, each row's kind (``upsert``/``delete``) and its sequence value."""

    rows: pa.Table
    ops: pa.Array
    sequence: pa.Array | None
    deletes: np.ndarray  # per row: whether it deletes its key


def find_column(names: list[str], wanted: str) -> str | None:
    lowered = wanted.lower()
    return next((n for n in names if n.lower() == lowered), None)


def to_changes(
    batch: pa.Table, target: WriteTarget, sequence_column: str | None, change_column: str = CHANGE_TYPE
) -> Changes:
    """Turn input rows (the table's columns by name, maybe ``change_column`` and a sequence) into changes."""
    names = batch.column_names
    change_name = find_column(names, change_column)
    sequence = None
    if sequence_column is not None:
        found = find_column(names, sequence_column)
        assert found is not None, "the writer checked the sequence column"
        sequence = batch.column(found).combine_chunks()
    if change_name is None:
        ops = pa.array(np.full(batch.num_rows, layout.UPSERT, dtype=object), pa.string())
    else:
        kinds = _kinds(batch, change_name)
        if (shown := _first_other(kinds, CHANGE_TYPES)) is not None:
            raise InvalidArgumentError(
                f"{CHANGE_TYPE} {shown} is not one of {', '.join(sorted(CHANGE_TYPES))}"
            )
        keep = pc.invert(pc.is_in(kinds, pa.array(sorted(IGNORED_TYPES))))
        if not pc.all(keep).as_py():
            batch, kinds = batch.filter(keep), kinds.filter(keep)
            sequence = sequence.filter(keep) if sequence is not None else None
        ops = pc.if_else(pc.is_in(kinds, pa.array(sorted(DELETE_TYPES))), layout.DELETE, layout.UPSERT)
    rows = conform(batch, target)
    is_delete = np.asarray(pc.equal(ops, layout.DELETE).fill_null(False))
    rows = null_where(rows, is_delete, {*target.keys, *target.sequence})  # a delete's sequence orders it
    return Changes(rows, ops, sequence, is_delete)


def check_appends(batch: pa.Table, table: str) -> None:
    """Rows for a table without a primary key may carry ``_change_type``, as its own change feed
    gives them (so a stream of it replicates it), but only ``insert``: nothing else has a key to act on."""
    change_name = find_column(batch.column_names, CHANGE_TYPE)
    if change_name is None:
        return
    if (shown := _first_other(_kinds(batch, change_name), {"insert"})) is not None:
        raise InvalidArgumentError(
            f"{table} has no primary key: {CHANGE_TYPE} {shown} needs one (only 'insert' rows append)"
        )


def _kinds(batch: pa.Table, change_name: str) -> pa.Array:
    return pc.utf8_lower(batch.column(change_name).combine_chunks().cast(pa.string()))


def _first_other(kinds: pa.Array, allowed: set[str] | frozenset[str]) -> str | None:
    """The first kind not in ``allowed``, as an error shows it (NULL or quoted); None if all are."""
    other = pc.invert(pc.is_in(kinds, pa.array(sorted(allowed)))).fill_null(True)
    if not pc.any(other).as_py():
        return None
    value = kinds.filter(other)[0].as_py()
    return "NULL" if value is None else repr(value)


def shown_key(keys: pa.Table, row: int) -> str:
    return ", ".join(
        f"{name}={'NULL' if (v := keys.column(name)[row].as_py()) is None else repr(v)}"
        for name in keys.column_names
    )


def check_null_keys(keys: pa.Table, what: str) -> None:
    for column in keys.columns:
        if column.null_count:
            row = int(np.nonzero(~np.asarray(column.is_valid()))[0][0])
            raise PrimaryKeyViolationError(f"{what} writes a null primary key ({shown_key(keys, row)})")


def check_not_null(rows: pa.Table, target: WriteTarget, what: str, deletes: np.ndarray | None = None) -> None:
    """Refuse a NULL in a NOT NULL column (``rows`` conformed to the table; ``deletes`` marks rows that
    delete their key, which carry nothing but the key). The key columns are checked apart."""
    for field in target.schema.fields:
        if not field.required or field.name in target.keys:
            continue
        column = rows.column(field.name)
        if not column.null_count:
            continue
        nulls = ~np.asarray(column.is_valid())
        if deletes is not None:
            nulls &= ~deletes
        if nulls.any():
            shown = (
                shown_key(rows.select(list(target.keys)), int(np.nonzero(nulls)[0][0])) if target.keys else ""
            )
            raise InvalidArgumentError(
                f"{what} writes NULL into NOT NULL column '{field.name}'" + (f" ({shown})" if shown else "")
            )


def newest_per_key(
    keys: pa.Table, sequence: pa.Array | None, what: str, scope: str, hint: str | None = SEQUENCE_HINT
) -> np.ndarray:
    """The rows to keep (indices, ascending): one per key, the newest by ``sequence``.

    Raises on a null key, on two changes of a key without a sequence, and on a tie or a NULL
    sequence among a key's changes. ``scope`` says what "one write" is (``in one micro-batch``),
    ``hint`` how to resolve two changes of a key (a SQL statement has none).
    """
    check_null_keys(keys, what)
    rows = keys.num_rows
    if rows < 2:
        return np.arange(rows)
    order_by = [(name, "ascending", "at_end") for name in keys.column_names]
    table = keys
    if sequence is not None:
        table = keys.append_column("__seq", sequence)
        order_by.append(("__seq", "descending", "at_end"))
    order = np.asarray(pc.sort_indices(table, order_by))
    ordered = keys.take(pa.array(order))
    same = np.ones(rows - 1, dtype=bool)
    for column in ordered.columns:
        values = column.combine_chunks()
        same &= np.asarray(pc.equal(values.slice(1), values.slice(0, rows - 1)).fill_null(False))
    if not same.any():
        return np.arange(rows)
    first_dup = int(np.nonzero(same)[0][0]) + 1
    if sequence is None:
        count = _run_length(same, first_dup - 1)
        raise PrimaryKeyViolationError(
            f"{what} writes primary key ({shown_key(ordered, first_dup)}) {count} times "
            f"{scope}" + (f"; {hint}" if hint else "")
        )
    _check_sequences(ordered, sequence.take(pa.array(order)), same, what)
    keep = np.concatenate([[True], ~same])
    return np.sort(order[keep])


def _run_length(same: np.ndarray, start: int) -> int:
    """How many rows share the key of sorted row ``start``."""
    count, i = 1, start
    while i < len(same) and same[i]:
        count, i = count + 1, i + 1
    return count


def _check_sequences(ordered: pa.Table, sequence: pa.Array, same: np.ndarray, what: str) -> None:
    """Changes of one key sorted newest first: the first must be strictly newer than the second."""
    duplicated = np.concatenate([[False], same]) | np.concatenate([same, [False]])
    nulls = duplicated & ~np.asarray(sequence.is_valid())
    if nulls.any():
        row = int(np.nonzero(nulls)[0][0])
        raise InvalidArgumentError(
            f"{what}: primary key ({shown_key(ordered, row)}) has several changes and a NULL "
            "sequence value among them"
        )
    rows = len(sequence)
    equal = np.asarray(pc.equal(sequence.slice(1), sequence.slice(0, rows - 1)).fill_null(False))
    # a tie matters only between a key's newest change and the next one
    starts = np.concatenate([[True], ~same[:-1]])
    ties = same & equal & starts
    if ties.any():
        row = int(np.nonzero(ties)[0][0]) + 1
        raise InvalidArgumentError(
            f"{what}: primary key ({shown_key(ordered, row)}) has two changes with the same "
            f"sequence value {sequence[row].as_py()!r}"
        )
