"""Which dimension version a lookup join's micro-batch meets (no Spark): the newest committed at or
before the batch's timestamp, held to multiples of lookup.reloading.interval, the first version
for a batch planned before any, and the version written down for a batch wins over the table."""

from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark.sql.types import LongType, StructField, StructType

from arctic_sql.streaming.lookup_task import LookupPlan, pinned_dimension, version_at


@dataclass(frozen=True)
class Commit:
    version: int
    committed_at_ms: int


COMMITS = [Commit(1, 1_000), Commit(2, 5_000), Commit(4, 9_000)]


def test_a_batch_meets_the_newest_version_committed_at_or_before_its_timestamp():
    assert version_at(COMMITS, 4_999, 0) == 1
    assert version_at(COMMITS, 5_000, 0) == 2
    assert version_at(COMMITS, 8_999, 0) == 2
    assert version_at(COMMITS, 60_000, 0) == 4


def test_the_reloading_interval_holds_a_batch_to_the_version_at_its_last_multiple():
    assert version_at(COMMITS, 9_500, 10_000) == 1  # boundary 0: before every version, so the first
    assert version_at(COMMITS, 10_000, 10_000) == 4
    assert version_at(COMMITS, 9_500, 4_000) == 2  # boundary 8 000


def test_a_batch_before_any_version_meets_the_first_and_none_without_one():
    assert version_at(COMMITS, 10, 0) == 1
    assert version_at([], 10_000, 0) is None


def _plan(cache_dir: str) -> LookupPlan:
    key = StructType([StructField("id", LongType())])
    return LookupPlan(
        spec=None,
        table="db.dim",
        table_uuid="u",
        primary_key=("id",),
        on=("id",),
        kept=(),
        dim_type=key,
        fact_names=("id",),
        output_type=key,
        with_version=False,
        left=False,
        buckets=4,
        interval_ms=0,
        cache_dir=cache_dir,
        memory_kib=1024,
    )


def test_a_replayed_batch_meets_the_version_written_down_for_it(tmp_path):
    """The pin of a batch's timestamp is read without asking the catalog (the plan has none here):
    a commit that became visible after the batch's first run cannot change what the replay meets."""
    plan = _plan(str(tmp_path))
    pins = os.path.join(plan.folder, "pins")
    os.makedirs(pins)
    with open(os.path.join(pins, "7000"), "w") as f:
        f.write("2")
    assert pinned_dimension(plan, 7000).version == 2
