"""The merge engines' fold over Arrow rows (table/reading/engine_fold.py), against plain Python."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.model.merge_engine import Engine, MergeEngine
from arctic_sql.table.reading.engine_fold import (
    BASE_TAG,
    TAG,
    TOMBSTONE_TAG,
    fold,
    fold_lasting,
    merge_lasting,
)
from arctic_sql.table.reading.node_merge import merge

KEYS = ["k"]


def tagged(rows: list[tuple], names=("k", "a", "b", "s")) -> pa.Table:
    """Rows (k, a, b, s, tag): tag BASE_TAG for a stored row, txn * 2 (+1 for a delete)."""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in range(len(names) + 1)]
    data = {n: pa.array(list(c), pa.int64()) for n, c in zip(names, columns[:-1], strict=True)}
    data[TAG] = pa.array(list(columns[-1]), pa.int64())
    return pa.table(data)


def as_rows(table: pa.Table) -> list[tuple]:
    return [tuple(r.values()) for r in table.to_pylist()]


def test_deduplicate_keeps_the_newest_change_and_a_delete_removes_the_key():
    rows = tagged(
        [
            (1, 10, 1, None, BASE_TAG),
            (1, 11, None, None, 4),
            (2, 20, 2, None, BASE_TAG),
            (2, None, None, None, 5),
        ]
    )
    assert as_rows(fold(rows, KEYS, MergeEngine())) == [(1, 11, None, None)]


def test_partial_update_sets_only_non_null_columns_and_deletes_reset():
    engine = MergeEngine(Engine.PARTIAL_UPDATE)
    rows = tagged(
        [
            (1, 10, 1, None, BASE_TAG),
            (1, None, 5, None, 4),
            (1, 12, None, None, 6),
            (2, 20, 2, None, BASE_TAG),
            (2, None, None, None, 3),  # delete
            (2, None, 7, None, 8),
        ]
    )
    assert as_rows(fold(rows, KEYS, engine)) == [(1, 12, 5, None), (2, None, 7, None)]
    ignoring = MergeEngine(Engine.PARTIAL_UPDATE, ignore_delete=True)
    assert as_rows(fold(rows, KEYS, ignoring)) == [(1, 12, 5, None), (2, 20, 7, None)]


def test_first_row_keeps_the_first_row_and_ignores_deletes():
    rows = tagged([(1, 10, 1, None, 2), (1, 11, 2, None, 4), (1, None, None, None, 7), (2, 5, 5, None, 8)])
    assert as_rows(fold(rows, KEYS, MergeEngine(Engine.FIRST_ROW))) == [(1, 10, 1, None), (2, 5, 5, None)]


def test_sequence_field_ignores_a_change_older_than_the_stored_row():
    engine = MergeEngine(Engine.DEDUPLICATE, sequence=("s",))
    rows = tagged(
        [
            (1, 10, 1, 5, BASE_TAG),
            (1, 11, 1, 3, 4),
            (2, 20, 2, 5, BASE_TAG),
            (2, 21, 2, 5, 4),
            (3, 30, 0, None, 2),
            (3, 31, 0, None, 4),
        ]
    )
    # key 1: seq 3 < 5 ignored; key 2: a tie goes to the later commit; key 3: NULLs tie, later wins
    assert as_rows(fold(rows, KEYS, engine)) == [(1, 10, 1, 5), (2, 21, 2, 5), (3, 31, 0, None)]


def test_aggregation_functions_fold_the_stored_row_with_the_changes():
    engine = MergeEngine(
        Engine.AGGREGATION, aggregates=(("a", "sum", False), ("b", "count", False), ("s", "max", False))
    )
    rows = tagged([(1, 10, 2, 4, BASE_TAG), (1, 5, 0, 9, 4), (1, None, None, 1, 6), (2, 3, 7, None, 8)])
    assert as_rows(fold(rows, KEYS, engine)) == [(1, 15, 3, 9), (2, 3, 1, None)]


def test_more_aggregates():
    fns = ("min", "first_value", "last_value", "first_non_null_value")
    engine = MergeEngine(
        Engine.AGGREGATION, aggregates=tuple((n, f, False) for n, f in zip(("a", "b", "s", "t"), fns))
    )
    rows = tagged(
        [(1, 4, None, 1, None, 2), (1, 2, 8, 2, 6, 4), (1, 3, 9, None, 7, 6)], names=("k", "a", "b", "s", "t")
    )
    assert as_rows(fold(rows, KEYS, engine)) == [(1, 2, None, None, 6)]


def test_listagg_bool_and_collect():
    engine = MergeEngine(
        Engine.AGGREGATION,
        aggregates=(("a", "listagg", False), ("b", "bool_or", False), ("c", "collect", True)),
    )
    rows = pa.table(
        {
            "k": [1, 1, 1, 2],
            "a": ["x", None, "y", None],
            "b": [False, True, None, None],
            "c": [[1, 2], [2, 3], None, [4]],
            TAG: pa.array([BASE_TAG, 4, 6, 2], pa.int64()),
        }
    )
    assert fold(rows, KEYS, engine).to_pylist() == [
        {"k": 1, "a": "x,y", "b": True, "c": [1, 2, 3]},
        {"k": 2, "a": None, "b": None, "c": [4]},
    ]


def test_a_delete_with_a_sequence_applies_only_at_or_above_the_running_maximum():
    engine = MergeEngine(Engine.DEDUPLICATE, sequence=("s",))
    rows = tagged(
        [
            (1, 10, 1, 5, BASE_TAG),
            (1, None, None, 3, 5),  # late delete below the stored sequence: ignored
            (2, 20, 2, 5, BASE_TAG),
            (2, None, None, 5, 5),  # a tie goes to the later commit: the delete applies
            (3, 30, 3, 5, BASE_TAG),
            (3, None, None, None, 5),  # no sequence (SQL DELETE): always applies
            (4, 40, 4, 5, BASE_TAG),
            (4, None, None, 7, 5),  # applies, and leaves nothing behind (no tombstone):
            (4, 41, 4, 2, 6),  # so the running maximum starts again and this upsert applies
            (5, 50, 5, 9, 4),
            (5, None, None, 1, 5),  # ignored: below 9
            (5, None, None, 9, 7),  # applies
            (5, 51, 5, 0, 8),  # after it: applies
            (5, None, None, None, 9),  # NULL: applies whatever the sequence
        ]
    )
    assert as_rows(fold(rows, KEYS, engine)) == [(1, 10, 1, 5), (4, 41, 4, 2)]
    partial = MergeEngine(Engine.PARTIAL_UPDATE, sequence=("s",))
    assert as_rows(fold(rows, KEYS, partial)) == [(1, 10, 1, 5), (4, 41, 4, 2)]
    assert as_rows(
        fold(rows, KEYS, MergeEngine(Engine.PARTIAL_UPDATE, sequence=("s",), ignore_delete=True))
    ) == [
        (1, 10, 1, 5),
        (2, 20, 2, 5),
        (3, 30, 3, 5),
        (4, 40, 4, 5),
        (5, 50, 5, 9),
    ]


def _model(history: list[tuple], engine: MergeEngine) -> dict:
    """The engine applied one change at a time, in commit order: what the fold must equal."""
    state: dict = {}
    for k, a, b, s, tag in history:
        if tag % 2:
            if engine.engine is Engine.FIRST_ROW or engine.ignore_delete:
                continue
            old = state.get(k)
            # a delete with a sequence below the stored row's is ignored; one without always applies
            if old is not None and engine.sequence and s is not None and s < _lowest(old[2]):
                continue
            state.pop(k, None)
            continue
        old = state.get(k)
        if old is not None and engine.sequence and _lowest(s) < _lowest(old[2]):
            continue
        if old is None:
            state[k] = (a, b, s)
        elif engine.engine is Engine.DEDUPLICATE:
            state[k] = (a, b, s)
        elif engine.engine is Engine.PARTIAL_UPDATE:
            state[k] = tuple(n if n is not None else o for n, o in zip((a, b, s), old, strict=True))
        elif engine.engine is Engine.AGGREGATION:  # a: sum, b: max, s: last_non_null_value (SUM_MAX)
            total = None if a is None and old[0] is None else (a or 0) + (old[0] or 0)
            most = max((v for v in (b, old[1]) if v is not None), default=None)
            state[k] = (total, most, s if s is not None else old[2])
    return state


def _lowest(sequence: int | None) -> int:
    return -1 if sequence is None else sequence  # NULL is the lowest sequence


SUM_MAX = MergeEngine(
    Engine.AGGREGATION,
    aggregates=(("a", "sum", False), ("b", "max", False), ("s", "last_non_null_value", False)),
)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(
    "engine",
    [
        MergeEngine(Engine.DEDUPLICATE, sequence=("s",)),
        MergeEngine(Engine.PARTIAL_UPDATE),
        MergeEngine(Engine.PARTIAL_UPDATE, sequence=("s",)),
        MergeEngine(Engine.PARTIAL_UPDATE, ignore_delete=True),
        MergeEngine(Engine.FIRST_ROW),
    ],
)
def test_folding_a_prefix_first_gives_the_same_rows(seed, engine):
    """What optimizing relies on: folding commits 1..i into a stored row, then the rest, equals
    folding all at once, and both equal applying the changes one at a time."""
    rng = random.Random(seed)
    value = lambda: rng.choice([None, rng.randint(0, 9)])  # noqa: E731
    history = []
    for txn in range(1, 30):
        k = rng.randint(0, 4)
        if rng.random() < 0.25:  # a delete, with a sequence or without (SQL DELETE)
            history.append((k, None, None, rng.choice([None, rng.randint(0, 9)]), txn * 2 + 1))
        else:
            history.append((k, value(), value(), value(), txn * 2))
    expected = sorted((k, *v) for k, v in _model(history, engine).items())
    assert as_rows(fold(tagged(history), KEYS, engine)) == expected
    cut = rng.randint(1, len(history) - 1)
    stored = fold(tagged(history[:cut]), KEYS, engine)
    changes = tagged(history[cut:])
    tags = changes.column(TAG)
    assert (
        as_rows(merge(stored, [(changes.drop_columns([TAG]), tags.to_numpy())], KEYS, engine=engine))
        == expected
    )


LASTING = [
    MergeEngine(Engine.DEDUPLICATE, sequence=("s",), lasting_deletes=True),
    MergeEngine(Engine.PARTIAL_UPDATE, sequence=("s",), lasting_deletes=True),
]


@pytest.mark.parametrize("engine", LASTING)
def test_a_lasting_delete_ignores_a_late_upsert_and_leaves_a_tombstone(engine):
    rows = tagged(
        [
            (1, 10, 1, 5, BASE_TAG),
            (1, None, None, 7, 5),  # applies: the key is absent with sequence 7
            (1, 11, 1, 6, 6),  # a late upsert below the delete: ignored (main brings the key back)
            (2, None, None, 7, TOMBSTONE_TAG),  # a stored tombstone holds as the delete did
            (2, 21, 2, 3, 4),  # ignored
            (2, 22, 2, 7, 6),  # a tie goes to the later commit: the key is back
            (3, None, None, 4, TOMBSTONE_TAG),
            (3, None, None, None, 5),  # no sequence: applies and clears the running maximum
            (3, 31, 3, 1, 6),  # so this applies
            (4, None, None, 9, TOMBSTONE_TAG),
            (4, None, None, 9, 5),  # a tie: the newer delete's tombstone
        ]
    )
    found, tombstones = fold_lasting(rows, KEYS, engine)
    assert as_rows(found) == [(2, 22, 2, 7), (3, 31, 3, 1)]
    assert as_rows(tombstones.sort_by("k")) == [(1, 7), (4, 9)]
    assert fold(rows, KEYS, engine).equals(found)


def _lasting_model(history: list[tuple], engine: MergeEngine) -> tuple[dict, dict]:
    """The engine one change at a time where an applied sequenced delete leaves its sequence."""
    state: dict = {}
    gone: dict = {}  # key -> the sequence of the applied delete that removed it
    for k, a, b, s, tag in history:
        floor = _lowest(state[k][2]) if k in state else gone.get(k)
        if tag % 2 and s is None:
            state.pop(k, None)
            gone.pop(k, None)
            continue
        if floor is not None and _lowest(s) < floor:
            continue
        if tag % 2:
            state.pop(k, None)
            gone[k] = s
            continue
        old = state.get(k)
        gone.pop(k, None)
        if old is None or engine.engine is Engine.DEDUPLICATE:
            state[k] = (a, b, s)
        else:
            state[k] = tuple(n if n is not None else o for n, o in zip((a, b, s), old, strict=True))
    return state, gone


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("engine", LASTING)
def test_lasting_deletes_fold_a_prefix_and_its_tombstones_as_everything(seed, engine):
    """Invariant 2 with tombstones: folding commits 1..i into stored rows and tombstones, then the
    rest, equals folding all at once and applying the changes one at a time; deletes and upserts
    of one key cross (out-of-order sequences)."""
    rng = random.Random(seed)
    value = lambda: rng.choice([None, rng.randint(0, 9)])  # noqa: E731
    history = []
    for txn in range(1, 40):
        k = rng.randint(0, 3)
        if rng.random() < 0.35:
            history.append((k, None, None, rng.choice([None, *range(10)]), txn * 2 + 1))
        else:
            history.append((k, value(), value(), rng.choice([None, *range(10)]), txn * 2))
    state, gone = _lasting_model(history, engine)
    expected = sorted((k, *v) for k, v in state.items())
    expected_gone = sorted(gone.items())
    found, tombstones = fold_lasting(tagged(history), KEYS, engine)
    assert as_rows(found) == expected
    assert as_rows(tombstones.sort_by("k")) == expected_gone
    cut = rng.randint(1, len(history) - 1)
    stored, stones = fold_lasting(tagged(history[:cut]), KEYS, engine)
    changes = tagged(history[cut:])
    tags = changes.column(TAG).to_numpy()
    rows, left = merge_lasting(stored, stones, [(changes.drop_columns([TAG]), tags)], KEYS, engine)
    assert as_rows(rows) == expected
    assert as_rows(left.sort_by("k")) == expected_gone


def test_engine_properties_are_checked_against_the_columns():
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    schema = Schema(
        NestedField(1, "k", LongType(), required=True),
        NestedField(2, "v", LongType()),
        identifier_field_ids=[1],
    )
    engine = MergeEngine.of({"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}, schema)
    assert engine.aggregates == (("v", "sum", False),)
    assert MergeEngine.of({"merge-engine": "aggregation"}, schema).aggregates == (
        ("v", "last_non_null_value", False),
    )
    for properties, message in [
        ({"merge-engine": "newest"}, "must be one of"),
        ({"sequence.field": "w"}, "names no column 'w'"),
        ({"merge-engine": "first-row", "sequence.field": "v"}, "not first-row"),
        ({"merge-engine": "aggregation", "fields.v.aggregate-function": "median"}, "must be one of"),
        ({"fields.v.aggregate-function": "sum"}, "needs merge-engine aggregation"),
        ({"partial-update.ignore-delete": "true"}, "needs merge-engine partial-update"),
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            MergeEngine.of(properties, schema)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(
    "engine",
    [
        MergeEngine(Engine.PARTIAL_UPDATE),
        MergeEngine(Engine.PARTIAL_UPDATE, ignore_delete=True),
        MergeEngine(Engine.FIRST_ROW),
        SUM_MAX,
    ],
)
def test_a_write_folds_a_keys_changes_as_if_applied_one_at_a_time(seed, engine):
    """Writes of several changes per key, each folded to one change per key (write_fold.py) and
    committed as one transaction: reading them equals applying every change one at a time, and a
    write the fold refuses is one that deletes a key and then writes it again."""
    from arctic_sql.table.writing.write_fold import fold_write

    rng = random.Random(seed)
    value = lambda: rng.choice([None, rng.randint(0, 9)])  # noqa: E731
    applied: list[tuple] = []  # every change of the committed writes, one transaction each
    stored: list[tuple] = []  # the folded changes, one transaction per write
    for txn in range(1, 12):
        write = []
        for _ in range(rng.randint(1, 6)):
            k = rng.randint(0, 3)
            if rng.random() < 0.2:
                write.append((k, None, None, None, True))
            else:
                write.append((k, value(), value(), value(), False))
        rows = tagged([(*w[:4], 0) for w in write]).drop_columns([TAG])
        deletes = np.array([w[4] for w in write])
        try:
            folded = fold_write(rows, deletes, KEYS, engine, "WRITE into t", "in one write")
        except InvalidArgumentError as e:
            assert "after deleting it" in str(e)
            assert any(
                w[4] and any(not v[4] and v[0] == w[0] for v in write[i + 1 :]) for i, w in enumerate(write)
            )
            continue
        keys = folded.rows.column("k").to_pylist()
        assert len(set(keys)) == len(keys)
        for row, gone in zip(as_rows(folded.rows), folded.deletes, strict=True):
            stored.append((*row, txn * 2 + int(gone)))
        applied.extend((*w[:4], len(applied) * 2 + 2 + int(w[4])) for w in write)
    expected = sorted((k, *v) for k, v in _model(applied, engine).items())
    assert as_rows(fold(tagged(stored), KEYS, engine)) == expected


def test_a_write_refuses_what_one_change_cannot_say():
    from arctic_sql.table.writing.write_fold import fold_write

    rows = tagged([(1, 1, 1, 1, 0), (1, 2, 2, 2, 0)]).drop_columns([TAG])
    deletes = np.array([False, False])
    counting = MergeEngine(Engine.AGGREGATION, aggregates=(("a", "count", False), ("b", "sum", False)))
    with pytest.raises(InvalidArgumentError, match=r"primary key \(k=1\) more than once in one write.*'a'"):
        fold_write(rows, deletes, KEYS, counting, "WRITE into t", "in one write")
    sequenced = MergeEngine(Engine.PARTIAL_UPDATE, sequence=("s",))
    with pytest.raises(InvalidArgumentError, match="sequence.field"):
        fold_write(rows, deletes, KEYS, sequenced, "WRITE into t", "in one write")
    one_count = tagged([(1, None, 1, 1, 0), (1, 2, 2, 2, 0)]).drop_columns([TAG])
    folded = fold_write(one_count, deletes, KEYS, counting, "WRITE into t", "in one write")
    assert as_rows(folded.rows) == [(1, 1, 3, 2)]  # sum of b; a change row counts one
