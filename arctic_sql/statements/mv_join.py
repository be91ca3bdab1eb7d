"""The incremental refresh of a ``join`` materialized view (mv_analysis.py): which left rows to
join again.

The view holds one row per left row at most (the ON equates every key column of the right source
with a left column), keyed by the left's key. A left row's view row can change only when the left
row changed, or when the right row it references changed (upserted or deleted); so the rows to join
again are the left's changed rows (their new values, from the latest-change feed) and, at the new
left version, the rows whose join columns name a changed right key. Every touched left key whose
new join gives no row (deleted, filtered out, its right row gone in an inner join) is deleted from
the view.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from typing import TYPE_CHECKING

from arctic_sql.statements.mv_analysis import Analysis

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.table.model.table import ArcticTable


def rows_to_join_again(
    analysis: Analysis,
    left: ArcticTable,
    left_now: DataFrame,
    left_changes: DataFrame | None,
    right_changes: DataFrame | None,
    keep: Callable[[DataFrame], DataFrame],
) -> tuple[DataFrame, DataFrame]:
    """(the left rows to run the view's query over, the touched left keys under the view's key
    names). ``left_now``: the left source at the refresh's version; ``*_changes``: each source's
    latest change per key since the last refresh (None: that source did not move). ``keep``
    caches a frame for the refresh: the left's changes and the left rows that reference a changed
    right key are each used twice (rows and keys), and computing them twice would read the left's
    change files, or scan the whole left, twice."""
    assert analysis.join is not None and (left_changes is not None or right_changes is not None)
    columns = [f"`{f.name}`" for f in left.schema.fields]
    key = [f"`{k}`" for k in analysis.source_key]
    rows, touched = [], []
    if left_changes is not None:
        left_changes = keep(left_changes)
        rows.append(left_changes.where("_change_type = 'upsert'").select(*columns))
        touched.append(left_changes.select(*key))
    if right_changes is not None:
        on = analysis.join.on
        changed = right_changes.selectExpr(*(f"`{right}` AS `{mine}`" for mine, right in on)).distinct()
        referencing = left_now.join(changed, [mine for mine, _ in on], "left_semi")
        if left_changes is not None:  # those are joined again from their changes already
            referencing = referencing.join(left_changes.select(*key), list(analysis.source_key), "left_anti")
        referencing = keep(referencing.select(*columns))
        rows.append(referencing)
        touched.append(referencing.select(*key))
    names = [f"`{s}` AS `{k}`" for s, k in zip(analysis.source_key, analysis.key, strict=True)]
    keys = reduce(lambda a, b: a.unionByName(b), touched).selectExpr(*names).distinct()
    return reduce(lambda a, b: a.unionByName(b), rows), keys
