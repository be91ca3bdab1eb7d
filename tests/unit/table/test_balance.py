"""reader.balance: node groups shared among Spark tasks, one per core, by size."""

from __future__ import annotations

import random

import pytest

from arctic_sql.table.reading.merge_on_read import balance


@pytest.mark.parametrize("seed", range(5))
def test_every_group_in_one_share_and_no_share_above_the_largest_group_plus_an_even_split(seed):
    rng = random.Random(seed)
    sizes = [rng.randint(1, 1000) for _ in range(rng.randint(1, 40))]
    slots = rng.randint(1, 8)
    shares = balance(sizes, slots)
    assert sorted(i for share in shares for i in share) == list(range(len(sizes)))
    assert len(shares) == min(slots, len(sizes))
    # Largest first to the least loaded share: no share exceeds an even split by more than one group.
    assert max(sum(sizes[i] for i in share) for share in shares) <= sum(sizes) / len(shares) + max(sizes)


def test_two_cores_four_equal_groups_take_two_each():
    assert sorted(len(share) for share in balance([5, 5, 5, 5], 2)) == [2, 2]
