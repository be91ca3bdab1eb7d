"""The optimizing planner on synthetic file lists (DESIGN "Self-optimizing", Planning). No Spark.

The central invariant is "every input row is handled once and no two tasks write one file": tasks
have distinct target nodes at the write level; a file at or below the write level belongs to the one
target node above it; an *upper* file (above the write level) belongs to every target node below it,
so it is rewritten by all of them or by none, and those tasks keep only their own node's rows.
"""

from __future__ import annotations

import random

import pytest

from arctic_sql.optimizer.evaluator import FULL, MAJOR, MINOR
from arctic_sql.optimizer.inputs import PlanFile, Settings, overlaps
from arctic_sql.optimizer.planner import (
    PartitionInput,
    Task,
    plan,
    plan_partition,
    subtree_roots,
    take_change_prefix,
)
from arctic_sql.table.format.tree import DataTreeNode

MB = 1024 * 1024
SETTINGS = Settings()  # target 128 MB: fragments <= 16 MB, undersized <= 96 MB, segments above
FRAGMENT, UNDERSIZED, SEGMENT = 8 * MB, 64 * MB, 128 * MB


def base(
    path: str, node: int, size: int = SEGMENT, keys: tuple | None = None, partition: str = "p"
) -> PlanFile:
    """A base file; ``keys`` is the (min, max) of a one-column key, None for unknown bounds."""
    return PlanFile(path, "base", node, partition, 1000, size, key_bounds=None if keys is None else (keys,))


def change(
    path: str,
    node: int,
    txn: int = 1,
    keys: tuple | None = None,
    size: int = MB,
    partition: str = "p",
    delete: bool = False,
) -> PlanFile:
    return PlanFile(
        path,
        "change",
        node,
        partition,
        10,
        size,
        sequence_number=txn,
        is_delete=delete,
        key_bounds=None if keys is None else (keys,),
    )


def targets_of(f: PlanFile, level: int) -> set[int]:
    """Ids of the write-level nodes that can hold a row of ``f``: the nodes there related to it."""
    mask = (1 << level) - 1
    return {n.id for n in (DataTreeNode(mask, i) for i in range(mask + 1)) if n.is_related(f.node)}


def by_target(tasks: list[Task]) -> dict[int | None, Task]:
    return {t.target_node: t for t in tasks}


def paths(files) -> set[str]:
    return {f.path for f in files}


def covered(task: Task) -> set[str]:
    """The base files a task handles: rewritten, or kept with position deletes."""
    return paths(task.base_files) | paths(task.kept_files)


def check_invariants(
    tasks: list[Task], base_files: list[PlanFile], change_files: list[PlanFile], settings: Settings
) -> None:
    level = settings.write_level
    targets = [t.target_node for t in tasks]
    assert len(targets) == len(set(targets)), "two tasks write one target node"
    assert all(DataTreeNode.of_id(t).level == level for t in targets), "a target is not at the write level"
    for t in tasks:
        assert t.input_files, "a task without inputs"
        assert len(paths(t.input_files)) == len(t.input_files), "a file twice in one task"
        assert all(not f.is_change for f in t.base_files) and all(f.is_change for f in t.change_files)
        assert not paths(t.base_files) & paths(t.kept_files), "a file both rewritten and kept"
        if t.kept_files:  # kept files get position deletes from the task's changes, in memory
            assert t.change_files and not t.has_upper_files
            assert sum(f.file_size for f in t.input_files) <= settings.in_memory_max_bytes
            assert all(f.file_size > settings.fragment_size for f in t.kept_files), "a fragment kept"
        for f in t.input_files:
            assert t.target_node in targets_of(f, level), f"{f.path} holds no row of node {t.target_node}"
        upper = any(f.node.level < level for f in t.input_files)
        assert t.has_upper_files == upper, f"has_upper_files wrong for node {t.target_node}"
    for f in [*base_files, *change_files]:
        covering = {t.target_node for t in tasks if f.path in paths(t.input_files)}
        if f.is_change:
            # The new watermark hides every change file: each must reach every node it has rows for.
            assert covering == targets_of(f, level), f"change file {f.path} covered for {covering}"
        elif f.node.level < level:
            assert covering in (set(), targets_of(f, level)), f"upper file {f.path} only partly rewritten"
        else:
            assert len(covering) <= 1, f"base file {f.path} rewritten by two tasks"
    # Merge correctness: a base file that may hold a key of a merged change file is rewritten with it.
    for t in tasks:
        for c in t.change_files:
            for b in base_files:
                if t.target_node in targets_of(b, level) and overlaps(b, c):
                    assert b.path in covered(t), (
                        f"{b.path} may hold a key of {c.path} but is neither rewritten nor kept"
                    )


# --- subtree roots ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node_ids", "expected"),
    [
        ([], []),
        ([1, 4, 5, 6, 7], [1]),  # a root node with files swallows the whole tree
        ([4, 5, 6, 7], [4, 6, 5, 7]),  # pre-order: 4 and 6 are the children of 2, 5 and 7 of 3
        ([7, 3, 2], [2, 3]),
        ([2, 8, 12, 5, 13], [2, 5]),  # 8 and 12 lie under 2; 13 under 5
        ([9, 3, 15, 11], [3]),  # 9, 15 and 11 all lie under 3 (index & 1 == 1)
        ([9, 15, 11, 5], [5, 11, 15]),  # 9 under 5; 11 and 15 under the empty 7
        ([8, 12, 10, 14], [8, 12, 10, 14]),  # all leaves of 8 buckets under node 2, in pre-order
    ],
)
def test_subtree_roots_in_preorder(node_ids, expected):
    assert [n.id for n in subtree_roots(DataTreeNode.of_id(i) for i in node_ids)] == expected


def test_subtree_roots_are_disjoint_and_cover_every_node():
    rng = random.Random(7)
    for _ in range(200):
        nodes = {DataTreeNode.of_id(rng.randint(1, 31)) for _ in range(rng.randint(1, 8))}
        roots = subtree_roots(nodes)
        for node in nodes:
            assert sum(node.is_descendant_of(r) for r in roots) == 1
        assert all(not a.is_related(b) for a in roots for b in roots if a != b)


# --- key ranges ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (((0, 99),), ((100, 110),), False),
        (((0, 100),), ((100, 110),), True),  # bounds are inclusive
        (((5, 6),), ((0, 10),), True),
        (((0, 10), ("a", "c")), ((5, 15), ("d", "f")), False),  # composite: disjoint on one column
        (((0, 10), ("a", "d")), ((5, 15), ("d", "f")), True),
        (((0, 10), (None, None)), ((5, 15), ("d", "f")), True),  # an unknown column bound is no evidence
        (None, ((100, 110),), True),
        (((0, 1),), None, True),
    ],
)
def test_overlaps(a, b, expected):
    fa = PlanFile("a", "base", 4, "p", 1, 1, key_bounds=a)
    fb = PlanFile("b", "change", 4, "p", 1, 1, key_bounds=b)
    assert overlaps(fa, fb) is expected and overlaps(fb, fa) is expected


@pytest.mark.parametrize("mode", [MINOR, MAJOR])
def test_segments_clear_of_the_change_data_are_not_rewritten(mode):
    low, high = base("low", 4, keys=(0, 99)), base("high", 4, keys=(100, 199))
    c = change("c", 4, keys=(150, 160))
    tasks = plan_partition("p", [low, high], [c], mode, SETTINGS)
    assert [t.target_node for t in tasks] == [4]
    # The segment the change data overlaps stays, with position deletes for the rows it supersedes.
    assert paths(tasks[0].kept_files) == {"high"} and paths(tasks[0].change_files) == {"c"}
    assert not tasks[0].base_files
    check_invariants(tasks, [low, high], [c], SETTINGS)


def test_unknown_bounds_overlap_everything():
    low, high = base("low", 4, keys=(0, 99)), base("high", 4, keys=(100, 199))
    tasks = plan_partition("p", [low, high], [change("c", 4, keys=None)], MINOR, SETTINGS)
    assert covered(tasks[0]) == {"low", "high"}
    unknown = base("unknown", 4, keys=None)
    tasks = plan_partition("p", [high, unknown], [change("c", 4, keys=(10, 20))], MINOR, SETTINGS)
    # The unknown file may hold a key of c; it also overlaps `high`, which joins their group.
    assert covered(tasks[0]) == {"unknown", "high"}
    other_node = base("other", 5, keys=None)  # unknown bounds, but no key of node 4
    tasks = plan_partition("p", [low, other_node], [change("c", 4, keys=(150, 160))], MINOR, SETTINGS)
    assert [(t.target_node, paths(t.base_files)) for t in tasks] == [(4, set())]


def test_key_range_groups_are_transitive():
    # c touches the fragment, the fragment touches the low segment: one group, all rewritten.
    files = [
        base("low", 4, keys=(0, 99)),
        base("frag", 4, FRAGMENT, keys=(50, 150)),
        base("far", 4, keys=(500, 600)),
    ]
    c = change("c", 4, keys=(150, 160))
    tasks = plan_partition("p", files, [c], MINOR, SETTINGS)
    assert paths(tasks[0].base_files) == {"frag"} and paths(tasks[0].kept_files) == {"low"}
    check_invariants(tasks, files, [c], SETTINGS)


# --- minor, major, full ----------------------------------------------------------------------

# One target node, no change data, key-range groups: {f1, f2} two fragments, {u1, u2} two undersized,
# {f3, s1} a fragment with a segment, {s2} a lone segment, {u3} a lone undersized, {f4} a lone fragment.
MODE_FILES = [
    base("f1", 4, FRAGMENT, (0, 10)),
    base("f2", 4, FRAGMENT, (5, 15)),
    base("u1", 4, UNDERSIZED, (20, 30)),
    base("u2", 4, UNDERSIZED, (25, 35)),
    base("f3", 4, FRAGMENT, (40, 50)),
    base("s1", 4, SEGMENT, (45, 200)),
    base("s2", 4, SEGMENT, (300, 400)),
    base("u3", 4, UNDERSIZED, (500, 600)),
    base("f4", 4, FRAGMENT, (700, 800)),
]


@pytest.mark.parametrize(
    ("mode", "rewritten"),
    [
        # Every group holding a fragment (the node has >= 2); without change data a segment in such a
        # group is no input at all (nothing supersedes its rows).
        (MINOR, {"f1", "f2", "f3", "f4"}),
        (MAJOR, {"f1", "f2", "u1", "u2", "f3", "u3", "f4"}),  # ... or an undersized segment
        (FULL, {"f1", "f2", "u1", "u2", "f3", "s1", "u3", "f4"}),  # everything but the lone clean segment
    ],
)
def test_what_each_mode_rewrites(mode, rewritten):
    tasks = plan_partition("p", MODE_FILES, [], mode, SETTINGS)
    assert len(tasks) == 1 and tasks[0].target_node == 4 and not tasks[0].change_files
    assert paths(tasks[0].base_files) == rewritten
    check_invariants(tasks, MODE_FILES, [], SETTINGS)


@pytest.mark.parametrize("mode", [MINOR, MAJOR, FULL])
def test_a_lone_clean_segment_is_left_alone(mode):
    assert plan_partition("p", [base("s", 5)], [], mode, SETTINGS) == []


def test_change_data_is_merged_in_every_mode():
    for mode in (MINOR, MAJOR, FULL):
        tasks = plan_partition(
            "p", [base("s", 5, keys=(0, 9))], [change("c", 5, keys=(3, 3))], mode, SETTINGS
        )
        assert [(t.target_node, covered(t), paths(t.change_files)) for t in tasks] == [(5, {"s"}, {"c"})]
        # Full rewrites the segment; minor and major leave it with position deletes.
        assert paths(tasks[0].kept_files) == (set() if mode == FULL else {"s"})


def deleted(path: str, node: int, size: int, rows: int, deleted_rows: int, keys: tuple) -> PlanFile:
    """A base file of ``rows`` rows, ``deleted_rows`` of them removed by a position-delete file."""
    from pyiceberg.manifest import DataFile, DataFileContent

    delete_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES, file_path=f"{path}-deletes", record_count=deleted_rows
    )
    return PlanFile(path, "base", node, "p", rows, size, key_bounds=(keys,), deletes=(delete_file,))


def test_minor_keeps_every_file_past_fragment_size_and_rewrites_fragments():
    files = [
        base("f", 4, FRAGMENT, (0, 50)),
        base("u", 4, UNDERSIZED, (40, 90)),
        base("s", 4, SEGMENT, (80, 200)),
    ]
    c = change("c", 4, keys=(0, 200))
    [task] = plan_partition("p", files, [c], MINOR, SETTINGS)
    assert paths(task.base_files) == {"f"} and paths(task.kept_files) == {"u", "s"}
    check_invariants([task], files, [c], SETTINGS)


def test_major_rewrites_the_segments_whose_garbage_passes_the_duplicate_ratio():
    clean = deleted("clean", 4, SEGMENT, 1000, 50, (0, 100))  # 5% deleted
    dirty = deleted("dirty", 4, SEGMENT, 1000, 150, (100, 200))  # 15% deleted
    undersized = base("u", 4, UNDERSIZED, (150, 250))
    c = change("c", 4, keys=(0, 250))
    settings = Settings(in_memory_max_bytes=1024 * MB)
    [task] = plan_partition("p", [clean, dirty, undersized], [c], MAJOR, settings)
    assert paths(task.base_files) == {"dirty", "u"} and paths(task.kept_files) == {"clean"}
    # Without change data, major still rewrites a segment past the ratio, and only it.
    [task] = plan_partition("p", [clean, dirty], [], MAJOR, SETTINGS)
    assert paths(task.base_files) == {"dirty"} and not task.kept_files
    # Minor leaves both in place; full rewrites both, removing every position delete.
    assert plan_partition("p", [clean, dirty], [], MINOR, SETTINGS) == []
    [task] = plan_partition("p", [clean, dirty], [], FULL, SETTINGS)
    assert paths(task.base_files) == {"clean", "dirty"}


def test_a_lone_segment_with_position_deletes_is_not_clean_for_full():
    [task] = plan_partition("p", [deleted("s", 5, SEGMENT, 1000, 1, (0, 9))], [], FULL, SETTINGS)
    assert paths(task.base_files) == {"s"}


def test_a_task_too_large_to_merge_in_memory_rewrites_its_files_whole():
    settings = Settings(in_memory_max_bytes=SEGMENT)
    [task] = plan_partition(
        "p", [base("s", 4, SEGMENT, (0, 9))], [change("c", 4, keys=(3, 3))], MINOR, settings
    )
    assert paths(task.base_files) == {"s"} and not task.kept_files


@pytest.mark.parametrize("mode", [MINOR, MAJOR])
def test_fragments_of_one_node_are_compacted_even_with_disjoint_key_ranges(mode):
    fragments = [base(f"f{i}", 4, FRAGMENT, keys=(10 * i, 10 * i + 9)) for i in range(20)]
    tasks = plan_partition("p", fragments, [], mode, SETTINGS)
    assert [t.target_node for t in tasks] == [4]
    assert paths(tasks[0].base_files) == paths(fragments)


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="unknown optimizing mode"):
        plan_partition("p", [base("s", 4)], [], "medium", SETTINGS)


# --- upper files and different bucket counts -------------------------------------------------


def test_a_root_node_file_is_assigned_to_every_target_node():
    root = base("root", 1, keys=(0, 50))
    segments = [
        base("s4", 4, keys=(0, 100)),
        base("s5", 5, keys=(0, 100)),
        base("s6", 6, keys=(500, 600)),
        base("s7", 7, keys=(500, 600)),
    ]
    c = change("c", 5, keys=(10, 20))
    tasks = by_target(plan_partition("p", [root, *segments], [c], MINOR, SETTINGS))
    assert sorted(tasks) == [4, 5, 6, 7]
    assert all(t.has_upper_files for t in tasks.values())
    # The root file goes everywhere; a segment goes along only where it overlaps the root file or c.
    assert {n: paths(t.base_files) for n, t in tasks.items()} == {
        4: {"root", "s4"},
        5: {"root", "s5"},
        6: {"root"},
        7: {"root"},
    }
    assert {n: paths(t.change_files) for n, t in tasks.items()} == {4: set(), 5: {"c"}, 6: set(), 7: set()}
    check_invariants(list(tasks.values()), [root, *segments], [c], SETTINGS)


def test_fewer_change_buckets_than_base_buckets():
    # Change at 2 buckets (nodes 2, 3), base at 4 (nodes 4..7): node 2 covers 4 and 6, node 3 covers 5 and 7.
    segments = [base(f"s{n}", n) for n in (4, 5, 6, 7)]
    changes = [change("c2", 2), change("c3", 3)]
    tasks = by_target(plan_partition("p", segments, changes, MINOR, SETTINGS))
    assert {n: paths(t.change_files) for n, t in tasks.items()} == {
        4: {"c2"},
        5: {"c3"},
        6: {"c2"},
        7: {"c3"},
    }
    assert {n: paths(t.base_files) for n, t in tasks.items()} == {n: {f"s{n}"} for n in (4, 5, 6, 7)}
    assert all(t.has_upper_files for t in tasks.values())
    check_invariants(list(tasks.values()), segments, changes, SETTINGS)


def test_more_change_buckets_than_base_buckets():
    # Change at 8 buckets (nodes 8..15): node 8 + i lies under base node 4 + (i & 3).
    segments = [base(f"s{n}", n) for n in (4, 5, 6, 7)]
    changes = [change(f"c{n}", n) for n in range(8, 16)]
    tasks = by_target(plan_partition("p", segments, changes, MINOR, SETTINGS))
    assert {n: paths(t.change_files) for n, t in tasks.items()} == {
        4: {"c8", "c12"},
        5: {"c9", "c13"},
        6: {"c10", "c14"},
        7: {"c11", "c15"},
    }
    assert not any(t.has_upper_files for t in tasks.values())
    check_invariants(list(tasks.values()), segments, changes, SETTINGS)


def test_mixed_tree_levels():
    # Base at 4 buckets; files at node 2 (upper: 4 and 6), node 4, node 12 (under 4) and node 7.
    settings = Settings(base_buckets=4, change_buckets=8)
    files = [base("n2", 2, FRAGMENT), base("n4", 4, FRAGMENT), base("n12", 12, FRAGMENT), base("n7", 7)]
    changes = [change("c15", 15)]  # under 7
    tasks = by_target(plan_partition("p", files, changes, MINOR, settings))
    assert {n: (covered(t), paths(t.change_files), t.has_upper_files) for n, t in tasks.items()} == {
        4: ({"n2", "n4", "n12"}, set(), True),
        6: ({"n2"}, set(), True),
        7: ({"n7"}, {"c15"}, False),
    }
    check_invariants(list(tasks.values()), files, changes, settings)


def test_more_base_buckets_than_the_files_were_written_with():
    # Base at 8 buckets, old files at 4: node 4 is now an upper file over nodes 8 and 12.
    settings = Settings(base_buckets=8, change_buckets=8)
    files = [base("n4", 4), base("n8", 8)]
    changes = [change("c12", 12)]
    tasks = by_target(plan_partition("p", files, changes, MINOR, settings))
    assert {n: paths(t.input_files) for n, t in tasks.items()} == {8: {"n4", "n8"}, 12: {"n4", "c12"}}
    check_invariants(list(tasks.values()), files, changes, settings)


def test_one_bucket_tables_write_at_the_root():
    settings = Settings(base_buckets=1, change_buckets=4)
    files = [base("root", 1)]
    changes = [change("c4", 4), change("c7", 7)]
    tasks = plan_partition("p", files, changes, MINOR, settings)
    assert [(t.target_node, paths(t.input_files), t.has_upper_files) for t in tasks] == [
        (1, {"root", "c4", "c7"}, False)
    ]


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("mode", [MINOR, MAJOR, FULL])
def test_invariants_hold_on_random_file_lists(seed, mode):
    rng = random.Random(seed)
    settings = Settings(base_buckets=rng.choice([1, 2, 4, 8]), change_buckets=rng.choice([1, 2, 4, 8]))

    def keys():
        if rng.random() < 0.1:
            return None
        lo = rng.randint(0, 1000)
        return lo, lo + rng.randint(0, 200)

    base_files = [
        base(f"b{i}", rng.randint(1, 15), rng.choice([FRAGMENT, UNDERSIZED, SEGMENT]), keys())
        for i in range(rng.randint(0, 12))
    ]
    change_files = [
        change(f"c{i}", rng.randint(1, 15), rng.randint(1, 4), keys(), delete=rng.random() < 0.3)
        for i in range(rng.randint(0, 8))
    ]
    tasks = plan_partition("p", base_files, change_files, mode, settings)
    check_invariants(tasks, base_files, change_files, settings)
    if mode == FULL:  # full leaves nothing behind but lone clean segments
        rewritten = set().union(*(paths(t.base_files) for t in tasks)) if tasks else set()
        for f in base_files:
            if f.path not in rewritten:
                assert f.file_size == SEGMENT and f.node.level >= settings.write_level


# --- tables without a key --------------------------------------------------------------------


def test_unkeyed_tables_bin_pack_the_files_the_mode_takes():
    settings = Settings(base_buckets=1, change_buckets=1, keyed=False)
    fragments = [base(f"f{i:02}", 1, FRAGMENT) for i in range(20)]  # 16 fit in one 128 MB target
    files = [*fragments, base("u", 1, UNDERSIZED), base("s", 1, SEGMENT)]
    tasks = plan_partition("p", files, [], MINOR, settings)
    assert [len(t.base_files) for t in tasks] == [16, 4]
    assert all(
        t.target_node is None and sum(f.file_size for f in t.base_files) <= settings.target_size
        for t in tasks
    )
    assert set().union(*(paths(t.base_files) for t in tasks)) == paths(fragments)
    assert plan_partition("p", [fragments[0], base("s", 1)], [], MINOR, settings) == []
    major = plan_partition("p", files, [], MAJOR, settings)
    assert "u" in set().union(*(paths(t.base_files) for t in major))
    assert "s" not in set().union(*(paths(t.base_files) for t in major))


# --- change prefix and plans -----------------------------------------------------------------

TXNS = {1: 3, 2: 2, 3: 4}  # transaction -> number of change files


def txn_files(txns: dict[int, int], partition: str = "p") -> list[PlanFile]:
    files = [
        change(f"t{txn}-{i}", 4 + i % 4, txn, partition=partition)
        for txn, n in txns.items()
        for i in range(n)
    ]
    random.Random(3).shuffle(files)  # arrival order must not matter
    return files


@pytest.mark.parametrize(
    ("max_files", "taken_txns"),
    [
        (100, [1, 2, 3]),
        (9, [1, 2, 3]),
        (8, [1, 2]),
        (5, [1, 2]),
        (4, [1]),
        (3, [1]),
        (1, [1]),  # at least one transaction, even one larger than the cap
    ],
)
def test_take_change_prefix_takes_whole_oldest_transactions(max_files, taken_txns):
    taken, last = take_change_prefix(txn_files(TXNS), max_files)
    assert sorted({f.sequence_number for f in taken}) == taken_txns
    assert len(taken) == sum(TXNS[t] for t in taken_txns)
    assert last == taken_txns[-1]


def test_take_change_prefix_is_a_prefix():
    # Transaction 3 alone would fit after 1, but 2 does not: the prefix stops at 1.
    taken, last = take_change_prefix(txn_files({1: 2, 2: 5, 3: 1}), 4)
    assert {f.sequence_number for f in taken} == {1} and last == 1
    assert take_change_prefix([], 10) == ([], None)


def test_plan_advances_the_watermark_to_the_last_transaction_taken():
    settings = Settings(max_file_count=5)
    segment = base("s", 4)
    partition = PartitionInput("p", MINOR, "test", [segment], txn_files({7: 3, 8: 2, 9: 4}), watermark=6)
    [planned] = plan([partition], settings).partitions
    assert (planned.from_watermark, planned.to_watermark) == (6, 8)
    assert {f.sequence_number for f in planned.change_inputs} == {7, 8}
    assert len(planned.change_inputs) == 5
    no_change = PartitionInput("q", FULL, "test", [base("f1", 4, FRAGMENT), base("f2", 4, FRAGMENT)], [], 6)
    [planned] = plan([no_change], settings).partitions
    assert (planned.from_watermark, planned.to_watermark) == (6, 6)


def test_plan_counts_an_upper_file_once():
    files = [base("root", 1, size=1000), base("s4", 4, FRAGMENT, keys=(0, 1))]
    [planned] = plan([PartitionInput("p", MINOR, "test", files, [], 0)], SETTINGS).partitions
    assert len(planned.tasks) == 4
    assert paths(planned.rewritten_base) == {"root", "s4"}
    assert planned.input_bytes == 1000 + FRAGMENT and planned.input_files_count == 2


def budget_inputs() -> list[PartitionInput]:
    # One change file each: the partition's input is exactly that many bytes.
    return [
        PartitionInput(name, MINOR, "test", [], [change(f"{name}-c", 4, 1, size=size, partition=name)], 0)
        for name, size in (("b", 200), ("c", 100), ("a", 300))
    ]


@pytest.mark.parametrize(
    ("budget", "planned", "skipped"),
    [
        (None, ["a", "b", "c"], []),
        (600, ["a", "b", "c"], []),
        (599, ["a", "b"], ["c"]),
        (400, ["a", "c"], ["b"]),  # costliest first; b does not fit after a, c still does
        (300, ["a"], ["b", "c"]),
        (10, ["a"], ["b", "c"]),  # at least one partition, even over budget
    ],
)
def test_plan_input_budget(budget, planned, skipped):
    result = plan(budget_inputs(), SETTINGS, budget)
    assert [p.partition for p in result.partitions] == planned
    assert result.skipped == skipped
    assert result.input_bytes == sum({"a": 300, "b": 200, "c": 100}[p] for p in planned)


def test_plan_drops_partitions_with_nothing_to_do():
    idle = PartitionInput("idle", MINOR, "test", [base("s", 4)], [], 0)
    busy = PartitionInput(
        "busy", MINOR, "test", [base("s", 4, keys=(0, 9))], [change("c", 4, keys=(1, 1))], 0
    )
    result = plan([idle, busy], SETTINGS, budget_bytes=1)
    assert [p.partition for p in result.partitions] == ["busy"] and result.skipped == []


def test_a_clustered_table_orders_major_and_full_and_rewrites_whole_nodes():
    """On a clustered table full also rewrites a lone clean segment (it may be in key order), and
    only major and full tasks are ordered: minor keeps key order."""
    clustered = Settings(clustered=True)
    [task] = plan_partition("p", [base("s", 5)], [], FULL, clustered)
    assert paths(task.base_files) == {"s"} and task.ordered
    assert plan_partition("p", [base("s", 5)], [], MAJOR, clustered) == []
    for mode in (MINOR, MAJOR, FULL):
        tasks = plan_partition("p", MODE_FILES, [], mode, clustered)
        assert [t.ordered for t in tasks] == [mode != MINOR]
        plain = plan_partition("p", MODE_FILES, [], mode, SETTINGS)
        assert [t.ordered for t in plain] == [False]
