"""A small MERGE's join of its source with the target's rows of its keys, done here in Arrow.

A partial MERGE (``UPDATE SET x.status = b.status``) holds both sides in this process: the source,
collected once (``merge_plan.SourceKeys``), and the target's rows of its keys (``table/reading/
lookup.py``). Handed to Spark as two local relations, their join is one job for the broadcast and
one for the join, about as much as the blind MERGE's whole statement. Joined here on the key (each
key has one target row) into one relation whose columns ``s`` and ``t`` are structs of each side's
row (``t`` NULL where no target row matched), the clauses' ``s.c`` and ``t.c`` read the structs'
fields, and Spark folds the whole statement into a local relation: no job at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from sqlglot import exp

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from arctic_sql.statements.merge_plan import MergePlan, SourceKeys


def joinable(plan: MergePlan, keys: SourceKeys) -> bool:
    """Whether the join can be done here: ``ON`` is equality of every key column with a source
    column and nothing else, and the clauses name columns only as ``source.c`` or ``target.c``
    (an unqualified column, a star or a subquery would read the joined relation's names otherwise)."""
    if keys.rows is None or keys.schema is None:
        return False
    source, target = plan.source_alias.lower(), plan.target_alias.lower()
    if source == target or any(a.startswith("_arctic") for a in (source, target)):
        return False
    pairs = plan._on_pairs()
    if any(p is None for p in pairs) or len(pairs) != len(plan.keys):
        return False
    if sorted(p[0].lower() for p in pairs if p) != sorted(k.lower() for k in plan.keys):
        return False
    for clause in plan.clauses:
        parts = [clause.condition, *(clause.assignments or {}).values()]
        for part in (p for p in parts if p is not None):
            if any(isinstance(n, exp.Star | exp.Select | exp.Subquery) for n in part.walk()):
                return False
            if any(
                c.table.lower() not in (source, target) or c.args.get("db") for c in part.find_all(exp.Column)
            ):
                return False
    return True


def joined_rows(
    plan: MergePlan, keys: SourceKeys, target: pa.Table, target_schema: StructType, marks: tuple[str, str]
) -> tuple[pa.Table, StructType]:
    """The source's rows, each with its target row (a left join on the key), as one table of the
    structs ``<source alias>`` and ``<target alias>`` and the marks (``marks``: the source's, always
    true, and the target's, true where a target row matched), with its Spark schema."""
    from pyspark.sql.types import BooleanType, StructField, StructType

    assert keys.rows is not None and keys.schema is not None  # joinable
    source = keys.rows
    source_mark, target_mark = marks
    actual = {name.lower(): name for name in source.column_names}
    pinned = plan._pinned_keys()
    assert pinned is not None  # joinable: ON pins every key
    names = [actual[pinned[k].lower()] for k in plan.keys]
    left = source.select(names).rename_columns(list(plan.keys)).cast(target.select(list(plan.keys)).schema)
    left = left.append_column("_arctic_left", pa.array(np.arange(source.num_rows, dtype=np.int64)))
    right = target.select(list(plan.keys)).append_column(
        "_arctic_right", pa.array(np.arange(target.num_rows, dtype=np.int64))
    )
    # SQL equality: a NULL key matches nothing (the target's keys are never NULL).
    left = left.drop_null()
    pairs = left.join(right, keys=list(plan.keys), join_type="inner")
    index = np.full(source.num_rows, -1, dtype=np.int64)
    index[pairs.column("_arctic_left").to_numpy()] = pairs.column("_arctic_right").to_numpy()
    unmatched = index < 0
    taken = target.take(pa.array(np.where(unmatched, 0, index), mask=unmatched)) if target.num_rows else None
    source_fields = [f for f in keys.schema.fields if f.name != source_mark]
    target_fields = list(target_schema.fields)
    source_struct = pa.StructArray.from_arrays(
        [source.column(f.name).combine_chunks() for f in source_fields], names=[f.name for f in source_fields]
    )
    target_arrays = (
        [taken.column(f.name).combine_chunks() for f in target_fields]
        if taken is not None
        else [pa.nulls(source.num_rows, target.schema.field(f.name).type) for f in target_fields]
    )
    target_struct = pa.StructArray.from_arrays(
        target_arrays, names=[f.name for f in target_fields], mask=pa.array(unmatched)
    )
    rows = pa.table(
        {
            plan.source_alias: source_struct,
            plan.target_alias: target_struct,
            source_mark: pa.array(np.ones(source.num_rows, dtype=bool)),
            target_mark: pa.array(np.where(unmatched, False, True), mask=unmatched),
        }
    )
    nullable = [StructField(f.name, f.dataType, True) for f in source_fields]
    schema = StructType(
        [
            StructField(plan.source_alias, StructType(nullable), False),
            StructField(
                plan.target_alias,
                StructType([StructField(f.name, f.dataType, True) for f in target_fields]),
                True,
            ),
            StructField(source_mark, BooleanType(), False),
            StructField(target_mark, BooleanType(), True),
        ]
    )
    return rows, schema
