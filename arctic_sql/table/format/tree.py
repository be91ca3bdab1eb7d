"""The hash-bucket tree on the primary key (DESIGN "Keys and the tree").

A node is ``(mask, index)`` with ``mask = 2^k - 1``; a row with key ``K`` lives in node
``(mask, hash(K) & mask)``. Children of ``(m, i)`` are ``(2m+1, i)`` and ``(2m+1, i+m+1)``, so a
key's node at every level lies on one root-to-leaf path, and unrelated nodes never share a key.
Node ids follow Amoro: ``id = mask + 1 + index`` (root is 1, four buckets are ids 4..7).

The hash is Spark's ``xxhash64`` over the key columns in declared order. It is the one hash
function of the project: every writer computes nodes with :func:`node_id_column`.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column


@dataclass(frozen=True, order=True)
class DataTreeNode:
    mask: int
    index: int

    def __post_init__(self) -> None:
        if self.mask < 0 or (self.mask + 1) & self.mask != 0:
            raise ValueError(f"tree node mask {self.mask} is not 2^k - 1")
        if not 0 <= self.index <= self.mask:
            raise ValueError(f"tree node index {self.index} is outside 0..{self.mask}")

    @classmethod
    def root(cls) -> DataTreeNode:
        return cls(0, 0)

    @classmethod
    def of_id(cls, node_id: int) -> DataTreeNode:
        if node_id < 1:
            raise ValueError(f"tree node id {node_id} is not positive")
        mask = (1 << (node_id.bit_length() - 1)) - 1
        return cls(mask, node_id - mask - 1)

    @classmethod
    def for_buckets(cls, buckets: int, index: int) -> DataTreeNode:
        return cls(buckets - 1, index)

    @property
    def id(self) -> int:
        return self.mask + 1 + self.index

    @property
    def level(self) -> int:
        return self.mask.bit_length()

    def children(self) -> tuple[DataTreeNode, DataTreeNode]:
        m = 2 * self.mask + 1
        return DataTreeNode(m, self.index), DataTreeNode(m, self.index + self.mask + 1)

    def parent(self) -> DataTreeNode:
        if self.mask == 0:
            raise ValueError("the root has no parent")
        pm = self.mask >> 1
        return DataTreeNode(pm, self.index & pm)

    def is_descendant_of(self, other: DataTreeNode) -> bool:
        """True when every key of ``self`` also belongs to ``other`` (a node is its own descendant)."""
        return self.mask >= other.mask and (self.index & other.mask) == other.index

    def is_related(self, other: DataTreeNode) -> bool:
        """Whether two nodes can hold the same key: one is an ancestor of the other."""
        return self.is_descendant_of(other) or other.is_descendant_of(self)


def key_hash(keys: list[Column], as_int: tuple[bool, ...] = ()) -> Column:
    """Spark's ``xxhash64`` of the key columns. A key widened from int to bigint (flagged in
    ``as_int``) hashes as an int where its value fits in one (keyhash.py): one branch per
    combination of such columns fitting or not (a NULL is skipped either way)."""
    from pyspark.sql import functions as F

    narrow = [i for i, flag in enumerate(as_int) if flag]
    if not narrow:
        return F.xxhash64(*keys)
    fits = {i: F.coalesce(keys[i].between(-(2**31), 2**31 - 1), F.lit(True)) for i in narrow}
    result: Column | None = None
    for chosen in itertools.product((True, False), repeat=len(narrow)):
        cast = {i for i, c in zip(narrow, chosen, strict=True) if c}
        hashed = F.xxhash64(*[k.cast("int") if i in cast else k for i, k in enumerate(keys)])
        condition = functools.reduce(
            lambda a, b: a & b, [fits[i] if c else ~fits[i] for i, c in zip(narrow, chosen, strict=True)]
        )
        result = F.when(condition, hashed) if result is None else result.when(condition, hashed)
    assert result is not None
    return result


def node_id_column(key_columns: list[str], buckets: int, as_int: tuple[bool, ...] = ()) -> Column:
    """The Spark column computing each row's node id for a tree of ``buckets`` leaves."""
    from pyspark.sql import functions as F

    mask = buckets - 1
    index = key_hash([F.col(c) for c in key_columns], as_int).bitwiseAND(F.lit(mask))
    return (index + F.lit(mask + 1)).cast("int")
