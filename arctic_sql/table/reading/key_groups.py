"""The row groups of a file that may hold some of a few looked-up keys, by their statistics.

Files are sorted by key (DESIGN "The tree"), so each row group's key statistics are a narrow range
and a key lies in one group of its file. pyarrow's own statistics pruning of ``k IN (...)`` gives up
on a large value set (a 1,000-key IN keeps every group: it simplifies by the set's bounds), so the
lookup checks each group's range against the sorted keys itself, a binary search per group.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.dataset as ds


@dataclass(frozen=True)
class KeySet:
    """The sorted distinct values of each key column of the keys a read looks up."""

    columns: tuple[tuple[str, np.ndarray], ...]  # object arrays: Python ints or strings compare exactly

    @classmethod
    def of(cls, keys: Sequence[str], values: Sequence[tuple[Any, ...]]) -> KeySet:
        """From key tuples (ints or strings, in ``keys`` order)."""
        return cls.of_columns(keys, [{v[i] for v in values} for i in range(len(keys))])

    @classmethod
    def of_columns(cls, keys: Sequence[str], distinct: Sequence[Iterable[Any]]) -> KeySet:
        """From each key column's distinct values (``distinct[i]`` for ``keys[i]``)."""
        columns = []
        for key, values in zip(keys, distinct, strict=True):
            ordered = sorted(values)
            array = np.empty(len(ordered), dtype=object)
            array[:] = ordered
            columns.append((key, array))
        return cls(tuple(columns))

    def row_groups(self, fragment: ds.ParquetFileFragment) -> list[int]:
        """The row groups of ``fragment`` whose statistics may hold a key: for every key column, a
        value within the group's min and max (or no usable statistics)."""
        metadata = fragment.metadata
        if metadata.num_row_groups == 0:
            return []
        first = metadata.row_group(0)
        position = {first.column(i).path_in_schema: i for i in range(first.num_columns)}
        checked = [(values, position[name]) for name, values in self.columns if name in position]
        return [
            g
            for g in range(metadata.num_row_groups)
            if all(_may_hold(values, metadata.row_group(g).column(i).statistics) for values, i in checked)
        ]


def _may_hold(values: np.ndarray, statistics: Any) -> bool:
    """Whether a sorted ``values`` has one within ``statistics``' min and max (True without them)."""
    if statistics is None or not statistics.has_min_max:
        return True
    low, high = statistics.min, statistics.max
    kind = type(values[0]) if len(values) else None
    if kind not in (int, str) or type(low) is not kind or type(high) is not kind:
        return True  # a type the keys do not compare with as they are (bytes, dates): keep the group
    return bool(np.searchsorted(values, low, "left") < np.searchsorted(values, high, "right"))
