"""Classification and triggers of self-optimizing (DESIGN "Self-optimizing"; Amoro's
CommonPartitionEvaluator and its keyed-Mixed variant). Each trigger is checked at its threshold and one
step below it. No Spark."""

from __future__ import annotations

import dataclasses

import pytest

from arctic_sql.optimizer.evaluator import (
    FULL,
    MAJOR,
    MINOR,
    History,
    PartitionMetrics,
    classify,
    evaluate,
    measure,
)
from arctic_sql.optimizer.inputs import PlanFile, Settings
from arctic_sql.table.model import properties

MB = 1024 * 1024
HOUR = 3_600_000
NOW = 1_000 * HOUR
SETTINGS = Settings()
NEVER = History()  # no optimize and no known data time: no interval can have passed


def base(path: str, node: int, size: int, rows: int = 1000) -> PlanFile:
    return PlanFile(path, "base", node, "p", rows, size)


def change(path: str, node: int, rows: int = 10, size: int = MB, delete: bool = False) -> PlanFile:
    return PlanFile(path, "change", node, "p", rows, size, sequence_number=1, is_delete=delete)


def metrics(**kwargs) -> PartitionMetrics:
    return PartitionMetrics("p", **kwargs)


def mode_of(
    m: PartitionMetrics, settings: Settings = SETTINGS, history: History = NEVER, now: int = NOW
) -> str | None:
    decision = evaluate(m, settings, history, now)
    assert decision.partition == "p" and decision.reason
    return decision.mode


# --- settings and classification -------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "key", "amoro"),
    [
        ("target_size", "self-optimizing.target-size", 128 * MB),
        ("fragment_ratio", "self-optimizing.fragment-ratio", 8),
        ("min_target_size_ratio", "self-optimizing.min-target-size-ratio", 0.75),
        ("minor_file_count", "self-optimizing.minor.trigger.file-count", 12),
        ("minor_interval_ms", "self-optimizing.minor.trigger.interval", HOUR),
        ("major_duplicate_ratio", "self-optimizing.major.trigger.duplicate-ratio", 0.1),
        ("full_interval_ms", "self-optimizing.full.trigger.interval", -1),
        ("max_file_count", "self-optimizing.max-file-count", 10_000),
        ("major_delete_rows", "self-optimizing.major.trigger.delete-rows", None),
        ("major_delete_ratio", "self-optimizing.major.trigger.delete-ratio", None),
        ("major_min_rows", "self-optimizing.major.trigger.min-rows", None),
        ("major_small_file_count", "self-optimizing.major.trigger.small-file-count", None),
        ("major_interval_ms", "self-optimizing.major.trigger.interval", None),
    ],
)
def test_settings_defaults_are_the_property_defaults(field, key, amoro):
    default = getattr(Settings(), field)
    assert default == properties.lookup(key).default
    if amoro is not None:  # Amoro's own default, where Amoro has the property
        assert default == amoro


@pytest.mark.parametrize(
    ("size", "store", "expected"),
    [
        (0, "base", "fragment"),
        (16 * MB, "base", "fragment"),  # target / fragment-ratio, inclusive
        (16 * MB + 1, "base", "undersized"),
        (96 * MB, "base", "undersized"),  # target x min-target-size-ratio, inclusive
        (96 * MB + 1, "base", "segment"),
        (1024 * MB, "base", "segment"),
        (1024 * MB, "change", "fragment"),  # change files are always fragments
        (50 * MB, "change", "fragment"),
    ],
)
def test_classify_at_the_edges(size, store, expected):
    assert classify(PlanFile("f", store, 4, "p", 1, size), SETTINGS) == expected


@pytest.mark.parametrize(
    ("size", "expected"), [(100, "fragment"), (101, "undersized"), (500, "undersized"), (501, "segment")]
)
def test_classify_follows_the_settings(size, expected):
    settings = Settings(target_size=1000, fragment_ratio=10, min_target_size_ratio=0.5)
    assert classify(PlanFile("f", "base", 4, "p", 1, size), settings) == expected


def test_measure_counts_by_class_and_nodes_written():
    base_files = [
        base("f4", 4, 1 * MB, 10),
        base("f5", 5, 2 * MB, 20),
        base("u", 6, 50 * MB, 300),
        base("s6", 6, 200 * MB, 4000),
        base("s7", 7, 200 * MB, 5000),
    ]
    changes = [change("c4", 4, rows=7), change("c6", 6, rows=8), change("d6", 6, rows=3, delete=True)]
    m = measure("p", base_files, changes, SETTINGS)
    assert (m.fragments, m.fragment_bytes, m.undersized, m.segments) == (2, 3 * MB, [50 * MB], 2)
    assert (m.change_files, m.change_bytes, m.upserted_rows, m.deleted_rows) == (3, 3 * MB, 15, 3)
    assert m.base_rows == 9330 and m.small_files == 5
    assert m.nodes == 3  # fragments at 4 and 5, change at 4 and 6; segments do not count
    assert m.rewrite_segments == 0
    assert measure("p", [base("s", 4, 200 * MB)], [], SETTINGS).nodes == 1  # never zero


# --- minor -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("buckets", "file_count", "nodes", "threshold"),
    [
        (4, 12, 1, 12),
        (4, 12, 4, 48),  # 12 per tree node written
        (16, 12, 1, 17),  # at least B + 1
        (4, 2, 2, 5),
    ],
)
def test_minor_file_count_threshold(buckets, file_count, nodes, threshold):
    settings = Settings(base_buckets=buckets, minor_file_count=file_count)
    below = metrics(fragments=threshold - 2, change_files=1, nodes=nodes)
    at = metrics(fragments=threshold - 1, change_files=1, nodes=nodes)
    assert mode_of(below, settings) is None
    assert mode_of(at, settings) == MINOR


def test_minor_file_count_of_a_table_without_key_does_not_scale():
    settings = Settings(base_buckets=1, change_buckets=1, keyed=False)
    assert mode_of(metrics(fragments=11, nodes=3), settings) is None
    assert mode_of(metrics(fragments=12, nodes=3), settings) == MINOR


@pytest.mark.parametrize(("since_ms", "expected"), [(HOUR, MINOR), (HOUR - 1, None)])
def test_minor_interval(since_ms, expected):
    history = History(last_minor_ms=NOW - since_ms)
    assert mode_of(metrics(change_files=1), history=history) == expected


@pytest.mark.parametrize(("fragments", "expected"), [(4, None), (5, MINOR)])
def test_minor_interval_without_change_needs_more_than_b_fragments(fragments, expected):
    assert mode_of(metrics(fragments=fragments), history=History(last_minor_ms=0)) == expected


def test_minor_interval_of_a_table_without_key_needs_two_small_files():
    settings = Settings(base_buckets=1, change_buckets=1, keyed=False)
    assert mode_of(metrics(fragments=1), settings, History(last_minor_ms=0)) is None
    assert mode_of(metrics(fragments=2), settings, History(last_minor_ms=0)) == MINOR


# --- clocks ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        (History(oldest_change_ms=NOW - HOUR), MINOR),  # never optimized: the clock starts with the data
        (History(oldest_change_ms=NOW - HOUR + 1), None),
        (History(created_ms=NOW - HOUR), MINOR),  # no change time known: since the table was created
        (History(oldest_change_ms=NOW - 60_000, created_ms=NOW - 10 * HOUR), None),  # the data time wins
        (
            History(last_minor_ms=NOW - 2 * HOUR, last_full_ms=NOW - 60_000),
            None,
        ),  # a full resets minor's clock
        (History(last_minor_ms=NOW - 2 * HOUR, last_major_ms=NOW - 60_000), None),  # so does a major
        (
            History(last_minor_ms=NOW - 60_000, oldest_change_ms=NOW - 10 * HOUR),
            None,
        ),  # an optimize beats data time
    ],
)
def test_minor_clock(history, expected):
    assert mode_of(metrics(change_files=1), history=history) == expected


def test_a_recent_minor_does_not_reset_the_stronger_clocks():
    history = History(last_minor_ms=NOW - 60_000, last_major_ms=NOW - HOUR, last_full_ms=NOW - 2 * HOUR)
    m = metrics(change_files=1)
    assert mode_of(m, Settings(major_interval_ms=HOUR), history) == MAJOR
    assert mode_of(m, Settings(full_interval_ms=2 * HOUR), history) == FULL
    # ... and a recent major does not reset full's.
    assert (
        mode_of(m, Settings(full_interval_ms=2 * HOUR), dataclasses.replace(history, last_major_ms=NOW))
        == FULL
    )


# --- full ------------------------------------------------------------------------------------


def test_full_is_off_by_default():
    assert SETTINGS.full_interval_ms == -1
    history = History(last_minor_ms=NOW, last_major_ms=NOW, last_full_ms=0, created_ms=0)
    assert (
        mode_of(metrics(change_files=1, fragments=5, undersized=[20 * MB, 20 * MB]), history=history) is None
    )


@pytest.mark.parametrize(("since_ms", "expected"), [(24 * HOUR, FULL), (24 * HOUR - 1, MINOR)])
def test_full_interval(since_ms, expected):
    history = History(last_full_ms=NOW - since_ms)  # minor's clock also runs from the last full
    assert mode_of(metrics(change_files=1), Settings(full_interval_ms=24 * HOUR), history) == expected


@pytest.mark.parametrize(
    ("m", "expected"),
    [
        (metrics(segments=3), None),
        (metrics(segments=3, fragments=4), None),  # not more than B fragments
        (metrics(segments=3, fragments=5), FULL),
        (metrics(undersized=[20 * MB]), None),
        (metrics(undersized=[20 * MB, 20 * MB]), FULL),
        (metrics(change_files=1), FULL),
    ],
)
def test_full_needs_something_to_clean(m, expected):
    settings = Settings(full_interval_ms=HOUR, minor_interval_ms=10 * HOUR)
    assert mode_of(m, settings, History(last_full_ms=NOW - HOUR, last_minor_ms=NOW)) == expected


# --- major -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change_node", "change_rows", "expected"),
    [
        (4, 100, None),  # 100 / 1000 = 0.1: not above the ratio
        (4, 101, MAJOR),
        (8, 101, MAJOR),  # a change node below the segment's sends all its rows there
        (5, 10_000, None),  # an unrelated node hits nothing
        (2, 200, None),  # a change node one level up spreads half of its rows to the segment's node
        (2, 202, MAJOR),
    ],
)
def test_major_duplicate_ratio(change_node, change_rows, expected):
    m = measure("p", [base("s", 4, 200 * MB, rows=1000)], [change("c", change_node, change_rows)], SETTINGS)
    assert m.rewrite_segments == (1 if expected else 0)
    assert mode_of(m) == expected


def test_major_duplicate_ratio_shares_change_rows_among_related_base_rows():
    segments = [base("s1", 4, 200 * MB, rows=1000), base("s2", 4, 200 * MB, rows=3000)]
    # 404 rows over 4000 base rows: s1 gets 101 (> 0.1 x 1000), s2 gets 303 (> 0.1 x 3000)
    assert measure("p", segments, [change("c", 4, 404)], SETTINGS).rewrite_segments == 2
    assert measure("p", segments, [change("c", 4, 400)], SETTINGS).rewrite_segments == 0
    settings = Settings(major_duplicate_ratio=0.5)
    assert measure("p", segments[:1], [change("c", 4, 500)], settings).rewrite_segments == 0
    assert measure("p", segments[:1], [change("c", 4, 501)], settings).rewrite_segments == 1


@pytest.mark.parametrize(
    ("sizes_mb", "expected"),
    [
        ([64, 64], MAJOR),  # sum reaches target (128) and the two smallest fit in one target file
        ([64, 63], None),  # sum short of the target
        ([70, 70], None),  # the two smallest would not fit in one target file
        ([20, 50, 58], MAJOR),
        ([20, 50, 57], None),
    ],
)
def test_major_when_undersized_segments_fill_a_target_file(sizes_mb, expected):
    assert mode_of(metrics(undersized=[s * MB for s in sizes_mb])) == expected


def test_undersized_segments_of_different_nodes_never_fill_a_target_file_together():
    # One 70 MB file in each of four nodes: 280 MB, but no two of them can merge. A trigger on the sum
    # ran a major on every poll that rewrote the same files again (a stream measured A1 of 27).
    files = [PlanFile(f"u{n}", "base", n, "p", 1000, 70 * MB) for n in (4, 5, 6, 7)]
    m = measure("p", files, [], SETTINGS)
    assert sorted(m.undersized_by_node) == [4, 5, 6, 7] and mode_of(m) is None
    two = measure("p", [*files, PlanFile("v4", "base", 4, "p", 1000, 58 * MB)], [], SETTINGS)
    assert two.undersized_by_node[4] == [70 * MB, 58 * MB] and mode_of(two) == MAJOR
    # Nor do they make a due full or major interval worth a run on their own.
    assert not m.mergeable_undersized and two.mergeable_undersized
    due = Settings(full_interval_ms=1, major_interval_ms=1)
    history = History(created_ms=0)
    assert mode_of(m, due, history) is None and mode_of(two, due, history) == FULL


@pytest.mark.parametrize(("deleted", "expected"), [(1_000_000, MAJOR), (999_999, None)])
def test_major_delete_rows(deleted, expected):
    # A large base keeps the delete ratio low: only the volume of deletes can fire.
    m = metrics(segments=100, base_rows=100_000_000, change_files=1, deleted_rows=deleted)
    assert mode_of(m) == expected


@pytest.mark.parametrize(
    ("base_rows", "upserted", "deleted", "expected"),
    [
        (80_000, 20_000, 20_000, MAJOR),  # 20_000 / 100_000 = 0.2
        (80_000, 20_000, 19_999, None),
        (79_999, 20_000, 50_000, None),  # below min-rows the ratio does not count
        (0, 0, 10, None),  # an empty base does not trigger on a few deletes
        (0, 100_000, 20_000, MAJOR),  # upserted rows count towards the volume
    ],
)
def test_major_delete_ratio(base_rows, upserted, deleted, expected):
    m = metrics(segments=1, base_rows=base_rows, change_files=2, upserted_rows=upserted, deleted_rows=deleted)
    decision = evaluate(m, SETTINGS, NEVER, NOW)
    assert decision.mode == expected
    if expected:
        assert "delete ratio" in decision.reason


@pytest.mark.parametrize(
    ("nodes", "small", "expected"),
    [
        (1, 64, MAJOR),
        (1, 63, MINOR),
        (2, 128, MAJOR),
        (2, 127, MINOR),
    ],
)
def test_major_small_file_count_per_node(nodes, small, expected):
    assert mode_of(metrics(fragments=small, nodes=nodes)) == expected


def test_major_interval_is_off_by_default_and_on_when_set():
    m, history = metrics(fragments=2), History(last_major_ms=NOW - HOUR, last_minor_ms=NOW)
    assert mode_of(m, SETTINGS, dataclasses.replace(history, last_major_ms=0)) is None
    settings = Settings(major_interval_ms=HOUR)
    assert mode_of(m, settings, history) == MAJOR
    assert mode_of(m, settings, dataclasses.replace(history, last_major_ms=NOW - HOUR + 1)) is None
    assert mode_of(metrics(fragments=1), settings, history) is None  # nothing to merge


# --- priority --------------------------------------------------------------------------------


def test_the_strongest_mode_due_wins():
    everything = metrics(fragments=70, change_files=1, undersized=[64 * MB, 64 * MB], deleted_rows=2_000_000)
    history = History(last_minor_ms=0, last_major_ms=0, last_full_ms=0)
    assert mode_of(everything, Settings(full_interval_ms=HOUR, major_interval_ms=HOUR), history) == FULL
    assert mode_of(everything, SETTINGS, history) == MAJOR
    assert mode_of(metrics(fragments=12), SETTINGS, history) == MINOR
    assert (
        mode_of(metrics(segments=5), Settings(full_interval_ms=HOUR, major_interval_ms=HOUR), history) is None
    )
